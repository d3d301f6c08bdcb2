"""What the checking hooks share: the loops a run has built and the
plugin's T2T module of its model."""

from typing import Any, Optional

from mmengine.runner import BaseLoop

_LOOPS = (
    ('train_dataloader', '_train_loop'),
    ('val_dataloader', '_val_loop'),
    ('test_dataloader', '_test_loop'),
)


def built_loaders(runner) -> dict[str, Any]:
    """The dataloaders of the loops the runner has built, by config key.

    ``Runner.train`` builds the training and validation loops and
    ``Runner.test`` the test loop before ``before_run``; the loop
    properties would build the others, so the attributes are read.
    """
    loaders = {}
    for key, attribute in _LOOPS:
        loop = getattr(runner, attribute, None)
        if isinstance(loop, BaseLoop):
            loaders[key] = loop.dataloader
    return loaders


def bare_model(runner) -> Any:
    """The model without its (distributed) wrapper."""
    return getattr(runner.model, 'module', runner.model)


def t2t_module(runner) -> Optional[Any]:
    """The backbone's T2T module, or None for another backbone."""
    backbone = getattr(bare_model(runner), 'backbone', None)
    return getattr(backbone, 'tokens_to_token', None)


def is_training(runner) -> bool:
    return isinstance(getattr(runner, '_train_loop', None), BaseLoop)


def few(names, limit: int = 5) -> str:
    """At most ``limit`` names, then how many more."""
    names = [str(name) for name in names]
    shown = ', '.join(names[:limit])
    return shown + (
        f' and {len(names) - limit} more' if len(names) > limit else ''
    )

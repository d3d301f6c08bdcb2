"""What the checking hooks share: their errors, the loops a run has built
and the plugin's T2T module of its model."""

from typing import Any, Optional

from mmengine.runner import BaseLoop


class TrainingStopped(RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do. The tools print it as one line and exit with 1."""


class RunCheckError(ValueError):
    """A check found that a run cannot start or that its result would mean
    nothing; the message is one line saying what to do. The tools print it
    alone and exit with 1."""


def built_loaders(runner) -> dict[str, Any]:
    """The dataloaders of the loops the runner has built, by config key
    (the loop properties would build the others)."""
    loaders = {}
    for mode in ('train', 'val', 'test'):
        loop = getattr(runner, f'_{mode}_loop', None)
        if isinstance(loop, BaseLoop):
            loaders[f'{mode}_dataloader'] = loop.dataloader
    return loaders


def bare_model(runner) -> Any:
    """The model without its (distributed) wrapper."""
    return getattr(runner.model, 'module', runner.model)


def dotted_getattr(obj: Any, path: str) -> Any:
    """``obj.a.b`` for ``path='a.b'``; None where an attribute is missing."""
    for name in path.split('.'):
        obj = getattr(obj, name, None)
    return obj


def t2t_module(runner) -> Optional[Any]:
    """The backbone's T2T module, or None for another backbone."""
    backbone = getattr(bare_model(runner), 'backbone', None)
    return getattr(backbone, 'tokens_to_token', None)


def is_training(runner) -> bool:
    """Whether the runner has built a training loop."""
    return isinstance(getattr(runner, '_train_loop', None), BaseLoop)


def checkpoint_hook(runner) -> Optional[Any]:
    """The run's ``CheckpointHook``, or None."""
    return next(
        (h for h in runner.hooks if type(h).__name__ == 'CheckpointHook'),
        None,
    )


def resumed_name(runner) -> str:
    """``'checkpoint FILE'`` of the file a run resumes, for messages."""
    resumed = runner._load_from
    return f'checkpoint {resumed}' if resumed else 'checkpoint'


def few(names) -> str:
    """At most five names, then how many more."""
    names = [str(name) for name in names]
    more = len(names) - 5
    return ', '.join(names[:5]) + (f' and {more} more' if more > 0 else '')

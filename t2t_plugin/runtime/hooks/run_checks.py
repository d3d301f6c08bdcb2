"""What the hooks share: what the run does and starts from, the loops it
has built, and what it reads of the model.

The runtime imports nothing of ``t2t_plugin.models``: it reads the few
facts a model part owns through attributes (docs/architecture.md, "What
the runtime reads of a model"). A backbone that records its arch
(``arch_record()``) is this plugin's, and its ``tokens_to_token`` gives
``in_channels``, ``total_stride`` and ``output_sizes(size)``; a neck
states ``backbone_widths(backbone)`` and ``width_problem(widths, key)``,
a head ``backbone_problem(backbone)``."""

from typing import Any, Optional

from mmengine.hooks import CheckpointHook
from mmengine.optim import BaseOptimWrapper

from ..sample_seeded_runner import SampleSeededRunner, StartPoint, start_point


def run_mode(runner) -> str:
    """``'train'``, ``'val'`` or ``'test'``: what the runner runs."""
    if isinstance(runner, SampleSeededRunner) and runner.mode is not None:
        return runner.mode
    # mmengine's Runner keeps it private. Its train() builds the optimizer
    # before the hooks' before_run, val() and test() never do; OpenMMLab's
    # tools call test() alone.
    if isinstance(runner.optim_wrapper, BaseOptimWrapper):
        return 'train'
    return 'test'


def is_training(runner) -> bool:
    """Whether the runner trains."""
    return run_mode(runner) == 'train'


def built_loaders(runner) -> dict[str, Any]:
    """The dataloaders of the loops the runner has built for what it runs,
    by config key (the loop properties would build the others)."""
    names = {'train': ('train', 'val'), 'val': ('val',), 'test': ('test',)}
    loaders = {}
    for name in names[run_mode(runner)]:
        loop = getattr(runner, f'{name}_loop')
        if loop is not None:
            loaders[f'{name}_dataloader'] = loop.dataloader
    return loaders


def start_of(runner) -> StartPoint:
    """Which checkpoint the run starts from, as
    :func:`~t2t_plugin.runtime.sample_seeded_runner.start_point` decides it
    (once, for every door), with, under mmengine's own Runner, what that
    Runner would resume wrongly (``problem``)."""
    if isinstance(runner, SampleSeededRunner):
        return StartPoint(runner.load_from, runner.resumes)
    # mmengine's Runner keeps its choice private: what its config asks
    # for (Runner.from_cfg passes both), judged by the same rule
    return start_point(
        runner.work_dir,
        runner.cfg.get('load_from'),
        runner.cfg.get('resume', False),
        runner.cfg.get('default_hooks'),
        host_runner=True,
    )


def bare_model(runner) -> Any:
    """The model without its (distributed) wrapper."""
    return getattr(runner.model, 'module', runner.model)


def dotted_getattr(obj: Any, path: str) -> Any:
    """``obj.a.b`` for ``path='a.b'``; None where an attribute is missing."""
    for name in path.split('.'):
        obj = getattr(obj, name, None)
    return obj


def plugin_backbone(model: Any) -> Optional[Any]:
    """The model's backbone if it is this plugin's (it records its arch),
    else None (mmpretrain's ``T2T_ViT`` has a ``tokens_to_token`` of its
    own, but no arch record)."""
    backbone = getattr(model, 'backbone', None)
    return (
        backbone if callable(getattr(backbone, 'arch_record', None)) else None
    )


def t2t_module(runner) -> Optional[Any]:
    """The backbone's T2T module, or None for another backbone."""
    backbone = plugin_backbone(bare_model(runner))
    return None if backbone is None else backbone.tokens_to_token


def width_problem(model: Any) -> Optional[str]:
    """One line when the stated ``in_channels`` of the head right after
    this plugin's backbone, or of a neck that states the backbone's
    widths, are not the widths the backbone gives (another arch than they
    were stated for), naming the config key to set, or when the head
    cannot read what the backbone gives in another way (its
    ``backbone_problem``); None when they agree."""
    backbone = plugin_backbone(model)
    if backbone is None:
        return None
    for name, module in model.named_modules():
        problem = None
        if hasattr(module, 'backbone_widths'):
            try:
                widths = module.backbone_widths(backbone)
            except ValueError:
                continue  # no maps: the neck's first forward says what to do
            if widths is not None:
                key = f'model.{name}.in_channels'
                problem = module.width_problem(widths, key)
        elif (
            hasattr(module, 'backbone_problem')
            and name == 'head'
            and getattr(model, 'neck', None) is None
        ):
            problem = module.backbone_problem(backbone)
        if problem:
            return problem
    return None


def checkpoint_hook(runner) -> Optional[CheckpointHook]:
    """The run's ``CheckpointHook``, or None."""
    return next(
        (hook for hook in runner.hooks if isinstance(hook, CheckpointHook)),
        None,
    )


def resumed_name(runner) -> str:
    """``'checkpoint FILE'`` of the file a run resumes, for messages."""
    resumed = start_of(runner).load_from
    return f'checkpoint {resumed}' if resumed else 'checkpoint'

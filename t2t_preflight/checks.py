"""The pre-flight of a run: every check of a config's inputs and outputs
that needs no model, in one place. Our tools run :func:`config_problem`
before the models are imported (``arguments.load_checked``); the Runner
runs :func:`check_config` as it is built, whichever door builds it, and
its hooks check what only the built datasets can tell."""

from typing import Optional

from mmengine.config import Config

from .archs import arch_problem
from .config import entry, file_config, warn_stale_variables
from .errors import ConfigError
from .inputs import checkpoint_problem
from .keys import misspelt_keys
from .outputs import output_problem
from .schedule import empty_scheduler, schedule_mismatch


def topk_problem(cfg: Config) -> Optional[str]:
    """The line for an accuracy of a top-k above the head's classes
    (``topk=(1, 5)`` with 3 classes): mmpretrain's ``Accuracy`` fails at
    the first evaluation, after a whole epoch of training; None if every
    top-k fits or the classes are not a number of the config."""
    head = entry(cfg, 'model', 'head')
    num_classes = head.get('num_classes') if isinstance(head, dict) else None
    if not isinstance(num_classes, int) or isinstance(num_classes, bool):
        return None
    # a head computes its top-k accuracies in training with cal_acc only
    places = [('model.head', head)] if head.get('cal_acc') else []
    for key in ('val_evaluator', 'test_evaluator'):
        evaluators = cfg.get(key)
        if isinstance(evaluators, dict):
            places.append((key, evaluators))
        elif isinstance(evaluators, (list, tuple)):
            places += [(f'{key}.{i}', e) for i, e in enumerate(evaluators)]
    for key, place in places:
        topk = place.get('topk') if isinstance(place, dict) else None
        values = (topk,) if isinstance(topk, int) else topk
        if not isinstance(values, (list, tuple)):
            continue
        wrong = [k for k in values if isinstance(k, int) and k > num_classes]
        if wrong:
            fitting = tuple(k for k in values if k not in wrong) or (1,)
            return (
                f'{key}.topk={tuple(values)} asks for top-{wrong[0]}, but '
                f'model.head.num_classes={num_classes}; set '
                f'{key}.topk={fitting} (a top-k needs k classes or more).'
            )
    return None


def config_problem(cfg: Config, training: bool = False) -> Optional[str]:
    """The first mistake of a config that its file and the disk answer
    alone, or None: an unknown arch, a schedule that cannot run, a top-k
    above the classes, a checkpoint that is not there (``init_cfg`` ones for a
    ``training`` only), a work dir that cannot be written."""
    work_dir = cfg.get('work_dir')
    return (
        arch_problem(cfg)
        or empty_scheduler(cfg)
        or topk_problem(cfg)
        or checkpoint_problem(cfg, training)
        # the Runner makes the work dir first thing: mmengine's OSError else
        or (work_dir and output_problem(work_dir, '--work-dir'))
        or None
    )


def check_config(cfg: Config) -> Optional[str]:
    """The checks a Runner makes on its config before it creates the work
    dir, its file read once for them: a warning line for a variable given
    as an option that does not reach its keys
    (:func:`~t2t_preflight.config.stale_variables`), then
    :func:`config_problem` and a key that is no argument of the class the
    registry builds for its dict
    (:func:`~t2t_preflight.keys.misspelt_keys`), which raise
    :class:`ConfigError`. Returns the warning line a training gives of a
    schedule that ends after it, or before it where the file ended it with
    training (:func:`~t2t_preflight.schedule.schedule_mismatch`), or
    None."""
    loaded = file_config(cfg)
    warn_stale_variables(cfg, loaded)
    problem = config_problem(cfg) or misspelt_keys(cfg)
    if problem:
        raise ConfigError(problem)
    return schedule_mismatch(cfg, loaded)

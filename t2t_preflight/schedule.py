"""The schedule of a config: a parameter scheduler that cannot run, one
that spans nothing (left out by the runner), and one that does not fit
the training."""

from typing import Any, Optional

from mmengine.config import Config

from .config import set_from


def schedulers(cfg: Config) -> list[tuple[int, dict]]:
    """``(index, scheduler)`` of the config's parameter schedulers that are
    dicts (``param_scheduler`` may be one dict or a list)."""
    schedulers = cfg.get('param_scheduler') or []
    if isinstance(schedulers, dict):
        schedulers = [schedulers]
    return [
        (index, scheduler)
        for index, scheduler in enumerate(schedulers)
        if isinstance(scheduler, dict)
    ]


def _schedule_end(cfg: Config) -> Optional[tuple[int, dict, str, int]]:
    """``(index, scheduler, train_cfg key, its value)`` of the parameter
    scheduler that ends last in the training loop's unit, or None."""
    train_cfg = cfg.get('train_cfg') or {}
    by_epoch = 'max_epochs' in train_cfg
    unit = 'max_epochs' if by_epoch else 'max_iters'
    total = train_cfg.get(unit)
    ends = [
        (index, scheduler)
        for index, scheduler in schedulers(cfg)
        if scheduler.get('by_epoch', True) == by_epoch
        and isinstance(scheduler.get('end'), int)
        and scheduler['end'] < 10**8  # not mmengine's INF (run's end)
    ]
    if not isinstance(total, int) or not ends:
        return None
    index, last = max(ends, key=lambda item: item[1]['end'])
    return index, last, unit, total


def spans_nothing(scheduler: Any) -> bool:
    """Whether a parameter scheduler config begins where it ends
    (``warmup_epochs=0``): it has nothing to schedule, and the runner
    leaves it out (mmengine's schedulers refuse it)."""
    return (
        isinstance(scheduler, dict)
        and isinstance(scheduler.get('begin', 0), int)
        and scheduler.get('begin', 0) == scheduler.get('end')
    )


def empty_scheduler(cfg: Config) -> Optional[str]:
    """The line for a parameter scheduler that ends before it begins
    (``--cfg-options max_epochs=1`` under a 2-epoch warm-up: mmengine's
    ValueError, in iterations, once training starts), naming the config
    variables its ends were set from, or None. One that ends where it
    begins is left out by the runner (:func:`spans_nothing`)."""
    train_cfg = cfg.get('train_cfg') or {}
    for index, scheduler in schedulers(cfg):
        begin, end = scheduler.get('begin', 0), scheduler.get('end')
        if not isinstance(begin, int) or not isinstance(end, int):
            continue
        if end < begin:
            by_epoch = scheduler.get('by_epoch', True)
            unit = 'epoch' if by_epoch else 'iteration'
            key = 'max_epochs' if by_epoch else 'max_iters'
            total = train_cfg.get(key)
            limit = f' (train_cfg.{key}={total})' if total is not None else ''
            kind = str(scheduler.get('type', 'scheduler')).split('.')[-1]
            names = [
                set_from(cfg, f'param_scheduler.{index}.{end_}')
                for end_ in ('begin', 'end')
            ]
            fix = (
                f'{names[0]}={begin} must be below {names[1]}={end}'
                if all(names)
                else 'give it a begin below its end'
            )
            return (
                f'param_scheduler.{index}: the {kind} begins at {unit} '
                f'{begin} and ends at {unit} {end}{limit}; {fix} (a '
                'warm-up must be shorter than training).'
            )
    return None


def schedule_mismatch(
    cfg: Config, loaded: Optional[Config] = None
) -> Optional[str]:
    """A warning line when the last parameter scheduler ends after the
    training does (``train_cfg.max_epochs=3`` on a cosine that ends at
    epoch 12: the learning rate barely decays), or before it while it
    ended with it in the file as ``loaded`` (``train_cfg.max_epochs=30``:
    18 epochs at the cosine's last value); else None. A schedule that ends
    early in the file itself (a cool-down at the last value) is meant."""
    found = _schedule_end(cfg)
    if found is None:
        return None
    index, last, unit, total = found
    end = last['end']
    kind = str(last.get('type', 'the scheduler')).split('.')[-1]
    key = f'param_scheduler.{index}'
    also = f' (and {key}.T_max)' if 'T_max' in last else ''
    if end > total:
        return (
            f'{key}.end={end} is after the end of training '
            f'(train_cfg.{unit}={total}): the {kind} stops early; set '
            f'{key}.end={total}{also} to finish it.'
        )
    before = _schedule_end(loaded) if loaded is not None else None
    if end < total and before is not None and before[1]['end'] == before[3]:
        return (
            f'{key}.end={end} is before the end of training '
            f'(train_cfg.{unit}={total}), which the file ended it with: '
            f'the {kind} ends early and its last value stays; set '
            f'{key}.end={total}{also} to stretch it.'
        )
    return None

"""Whether each key of a dict the Runner builds is an argument of the
class it goes to: the class the registry of the config's scope builds,
after the ``custom_imports`` and the plugin are imported, its arguments
read by ``inspect``."""

import inspect
from collections.abc import Iterator
from typing import Any, Optional

from mmengine.config import Config

from .config import dataset_configs, entry, nearest
from .schedule import schedulers

# Keys a builder takes from the dict besides the class's arguments.
_BUILDER_KEYS = {'type', '_scope_'}
_EXTRA_KEYS = {
    'loop': {'by_epoch'},  # the Runner picks the loop class with it
    'param scheduler': {'convert_to_iter_based'},
    'hook': {'priority'},
}


def _arguments(cls: type) -> Optional[set[str]]:
    """The keyword arguments ``cls(...)`` takes, following ``**kwargs``
    up the classes it inherits from; None when they reach a class whose
    arguments are open (nothing can be called misspelt then)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if '__init__' not in vars(klass):
            continue
        try:
            parameters = inspect.signature(klass.__init__).parameters
        except (TypeError, ValueError):
            return None
        names |= {
            name
            for name, p in parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            return names - {'self'}
    return None


def built_dicts(cfg: Config) -> Iterator[tuple[str, dict, str]]:
    """``(dotted key, dict, kind)`` of the dicts of a config that the
    Runner builds from a registry: the loops, hooks, the model, the
    optimizer, the parameter schedulers and the datasets (those a dataset
    wrapper holds too)."""
    for key in ('train_cfg', 'val_cfg', 'test_cfg'):
        if isinstance(cfg.get(key), dict):
            yield key, cfg[key], 'loop'
    for key, hook in (cfg.get('default_hooks') or {}).items():
        if isinstance(hook, dict):
            yield f'default_hooks.{key}', hook, 'hook'
    for index, hook in enumerate(cfg.get('custom_hooks') or []):
        if isinstance(hook, dict):
            yield f'custom_hooks.{index}', hook, 'hook'
    if isinstance(cfg.get('model'), dict):
        yield 'model', cfg.model, 'model'
    optimizer = entry(cfg, 'optim_wrapper', 'optimizer')
    if isinstance(optimizer, dict):
        yield 'optim_wrapper.optimizer', optimizer, 'optimizer'
    for index, scheduler in schedulers(cfg):
        yield f'param_scheduler.{index}', scheduler, 'param scheduler'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dataset = entry(cfg, loader, 'dataset')
        for key, item in dataset_configs(f'{loader}.dataset', dataset):
            yield key, item, 'dataset'


def _loop_class(key: str, loop: dict) -> Optional[str]:
    """The loop class the Runner builds for a loop dict: its type, else
    by the loop (a train loop by its ``by_epoch``; None without it)."""
    if 'type' in loop or key != 'train_cfg':
        return loop.get('type', 'ValLoop' if key == 'val_cfg' else 'TestLoop')
    if 'by_epoch' in loop:
        return (
            'EpochBasedTrainLoop' if loop['by_epoch'] else 'IterBasedTrainLoop'
        )
    return None


def argument_problem(
    key: str, item: dict, class_name: str, accepted: set[str], kind: str
) -> Optional[str]:
    """The line for the first key of ``item`` (the config dict at ``key``
    that builds ``class_name``, of ``kind``) that is no argument of the
    class (``accepted``), with the closest one; None if all are."""
    allowed = accepted | _BUILDER_KEYS | _EXTRA_KEYS.get(kind, set())
    for child_key in item:
        if child_key in allowed:
            continue
        close = nearest(child_key, sorted(accepted))
        hint = (
            f'did you mean {close!r}?'
            if close
            else f'it takes {", ".join(sorted(accepted))}.'
        )
        return (
            f'{key}.{child_key}: {class_name} takes no argument '
            f'{child_key!r}; {hint}'
        )
    return None


def registered_class(registry: Any, name: Any, scope: Any) -> Optional[type]:
    """The class ``registry`` builds for the ``type`` ``name`` in
    ``scope`` (a class itself, as a config of ``read_base()`` holds it,
    is itself), or None where it finds none: the builder says why."""
    if not isinstance(name, str):
        return name if inspect.isclass(name) else None
    with registry.switch_scope_and_registry(scope) as found:
        try:
            cls = found.get(name)
        except Exception:  # the builder reports what cannot be found
            return None
    return cls if inspect.isclass(cls) else None


def misspelt_keys(cfg: Config) -> Optional[str]:
    """Why a key of the config's loops, hooks, model (at any depth),
    optimizer, parameter schedulers or datasets is no argument of the
    class it goes to, with the closest argument, or None. The class is the
    one the registry of the config's scope will build, after the
    ``custom_imports`` and the plugin are imported (a user's class
    registered over a stock name is judged by its own arguments), read by
    ``inspect``. Classes that are not registered, or that pass open
    ``**kwargs`` on, are left to their builders."""
    from mmengine import registry

    registries = {
        'loop': registry.LOOPS,
        'hook': registry.HOOKS,
        'model': registry.MODELS,
        'optimizer': registry.OPTIMIZERS,
        'param scheduler': registry.PARAM_SCHEDULERS,
        'dataset': registry.DATASETS,
    }
    pending = list(built_dicts(cfg))
    while pending:
        key, item, kind = pending.pop(0)
        name = _loop_class(key, item) if kind == 'loop' else item.get('type')
        scope = item.get('_scope_', cfg.get('default_scope'))
        cls = registered_class(registries[kind], name, scope)
        accepted = _arguments(cls) if cls else None
        if accepted is None:
            continue
        problem = argument_problem(key, item, cls.__name__, accepted, kind)
        if problem:
            return problem
        for child_key, child in item.items():
            if (
                kind == 'model'
                and isinstance(child, dict)
                and 'type' in child
                # norm_cfg, act_cfg, init_cfg ...: built by functions
                # that take more than the class does
                and not child_key.endswith('_cfg')
            ):
                pending.append((f'{key}.{child_key}', child, 'model'))
    return None

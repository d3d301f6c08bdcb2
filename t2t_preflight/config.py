"""The one config reader of the tools and APIs, and the checks a config
allows before anything is built.

Every way ``Config.fromfile`` fails on a user's file (a syntax error, a
``mmdet::`` base of a toolbox that is not installed) becomes one
:class:`ConfigError` line. A config is read and merged with its
``--cfg-options`` exactly as mmengine reads and merges it; a new key close
to one its dict already has is refused with "did you mean". At module
level this file imports only the standard library and
``mmengine.config``: the tools load it before ``import t2t_plugin``, whose
registration imports mmpretrain's models (seconds, and mmdet with them
where it is installed), so that such mistakes are answered at once
(:mod:`t2t_preflight`).
"""

import ast
import difflib
import errno
import inspect
import logging
import os
import os.path as osp
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Optional, Union

from mmengine.config import Config

from .errors import ConfigError

# Top-level keys the host reads: the arguments of mmengine's Runner
# (written out, so that this file need not import torch), what its
# from_cfg and its methods read, and what the tools of mmpretrain, mmdet and
# mmseg read (the tests read them from the host's sources).
RUNNER_KEYS = frozenset(
    {
        'auto_scale_lr', 'cfg', 'custom_hooks', 'data_preprocessor',
        'default_hooks', 'default_scope', 'env_cfg', 'experiment_name',
        'launcher', 'load_from', 'log_level', 'log_processor', 'model',
        'optim_wrapper', 'param_scheduler', 'randomness', 'resume',
        'test_cfg', 'test_dataloader', 'test_evaluator', 'train_cfg',
        'train_dataloader', 'val_cfg', 'val_dataloader', 'val_evaluator',
        'visualizer', 'work_dir',
    }
    | {
        'activation_checkpointing', 'compile', 'custom_imports',
        'efficient_conv_bn_eval', 'find_unused_parameters', 'gpu_ids',
        'model_wrapper_cfg', 'runner_type', 'sync_bn', 'tta_model',
        'tta_pipeline', 'vis_backends',
    }
)  # fmt: skip


def load_config(
    config: Union[str, Path, Config],
    cfg_options: Optional[dict] = None,
    import_custom_modules: bool = True,
    warn: bool = True,
) -> Config:
    """A config from a file (or a copy of a Config), with the overrides of
    ``--cfg-options`` merged in: exactly what mmengine's
    ``Config.fromfile`` and ``merge_from_dict`` give. An option that
    changes a variable of the file whose keys keep the value it was read
    with is merged, with one warning line (:func:`stale_variables`) unless
    not ``warn`` (a config for a Runner, whose check says it).

    Args:
        config: The file, or a Config to copy.
        cfg_options: ``--cfg-options`` as mmengine's ``DictAction`` parses
            them.
        import_custom_modules: Import the config's ``custom_imports``
            (False: only read the file).
        warn: Log the line of :func:`stale_variables`, if any.

    Raises:
        ConfigError: If the file is missing or cannot be loaded, an option
            looks like a misspelt key, or an option does not apply.
    """
    options = dict(cfg_options or {})
    if isinstance(config, Config):
        cfg = config.copy()
    elif isinstance(config, (str, Path)):
        if not Path(config).is_file():
            raise ConfigError(
                f'Config file not found: {config}{_nearest_config(config)}'
            )
        try:
            cfg = Config.fromfile(
                str(config), import_custom_modules=import_custom_modules
            )
        # any failure of user-supplied config code
        except Exception as error:
            raise ConfigError(_describe(config, error)) from None
    else:
        raise ConfigError(
            'A config must be a file path or a Config, got '
            f'{type(config).__name__}.'
        )
    invalid = f'Invalid options for {cfg.filename or "the config"}'
    for key in options:
        problem = misspelt_option(cfg, key)
        if problem:
            raise ConfigError(f'{invalid}: --cfg-options {key}: {problem}')
    if options:
        loaded = cfg.copy()
        try:
            cfg.merge_from_dict(options)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ConfigError(
                f'{invalid}: cannot apply the options {options}: {error}'
            ) from None
        if warn:
            warn_stale_variables(cfg, loaded)
    return cfg


def _nearest_config(path: Union[str, Path]) -> str:
    """``'; did you mean <file>?'`` with the config file of the same
    folder (``configs/`` where the folder is not there) whose name is
    closest to ``path``'s, or ``'.'``."""
    path = Path(path)
    folder = path.parent if path.parent.is_dir() else Path('configs')
    if not folder.is_dir():
        return '.'
    close = nearest(path.name, (p.name for p in folder.glob('*.py')))
    return f'; did you mean {folder / close}?' if close else '.'


def import_custom_modules(cfg: Config) -> None:
    """Import a config's ``custom_imports``, as ``Config.fromfile`` does,
    for a config read without them.

    Raises:
        ConfigError: If one cannot be imported.
    """
    from mmengine.utils import import_modules_from_strings

    if not cfg.get('custom_imports'):
        return
    try:
        import_modules_from_strings(**cfg.custom_imports)
    except ImportError as error:
        raise ConfigError(_describe(cfg.filename, error)) from None


def _assigned_name(node: ast.stmt) -> Optional[str]:
    """The name a statement ``name = value`` (or ``name: T = value``)
    assigns, else None."""
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    else:
        targets = getattr(node, 'targets', [])
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        return targets[0].id
    return None


def nearest(
    word: Any, candidates: Iterable[str], cutoff: float = 0.6
) -> Optional[str]:
    """The candidate closest to ``word``, or None when none is close (the
    "did you mean" of every message)."""
    found = difflib.get_close_matches(str(word), list(candidates), 1, cutoff)
    return found[0] if found else None


def few(names) -> str:
    """At most five names, then how many more."""
    names = [str(name) for name in names]
    more = len(names) - 5
    return ', '.join(names[:5]) + (f' and {more} more' if more > 0 else '')


def entry(cfg: Any, key: str, name: str) -> Any:
    """``cfg[key][name]`` where ``cfg[key]`` is a dict (a config may hold
    a built object instead, a model or a dataloader), else None."""
    value = cfg.get(key)
    return value.get(name) if isinstance(value, dict) else None


def _child(container: Any, key: str) -> tuple[bool, Any]:
    """Whether ``container`` (a dict or a list) has ``key``, and the value."""
    if isinstance(container, (list, tuple)):
        if key.isdigit() and int(key) < len(container):
            return True, container[int(key)]
        return False, None
    if isinstance(container, (dict, Config)) and key in container:
        return True, container[key]
    return False, None


def misspelt_option(cfg: Config, key: str) -> Optional[str]:
    """Why the option ``key`` looks like a misspelling, or None: a top
    level neither the config nor the Runner knows, or a name added to a
    dict of the config that holds a close one (``max_epoch`` beside
    ``max_epochs``); mmengine would add either silently, and the class
    that gets it would fail long after, or never."""
    container: Any = cfg
    parts = key.split('.')
    if parts[0] not in cfg and parts[0] not in RUNNER_KEYS:
        known = sorted(set(cfg.keys()) | RUNNER_KEYS)
        close = nearest(parts[0], known)
        # ``lr=``, ``batch_size=``: a key the config holds deeper down
        deeper = [
            dotted
            for dotted, _ in _leaves(cfg.to_dict())
            if dotted.rsplit('.', 1)[-1] == parts[0]
            and 'pipeline' not in dotted
        ]
        if deeper and len(parts) == 1:
            hint = f'; it is set as {few(deeper)}: give the full key.'
        elif close:
            hint = f'; did you mean {close!r}?'
        else:
            hint = '; add it to the config first if it is meant to be new.'
        return f'the config has no key {parts[0]!r}{hint}'
    for depth, part in enumerate(parts):
        found, value = _child(container, part)
        if not found:
            if not isinstance(container, (dict, Config)):
                return None
            close = nearest(part, map(str, container), cutoff=0.85)
            if not close:
                return None
            where = '.'.join(parts[:depth]) or 'the config'
            return f'{where} has no key {part!r}; did you mean {close!r}?'
        container = value
    return None


def _leaves(value: Any, path: str = '') -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` of every entry below ``value``."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        dotted = f'{path}.{key}' if path else str(key)
        yield dotted, child
        yield from _leaves(child, dotted)


def environment_variable(text: str, name: str) -> Optional[str]:
    """The environment variable that a config's ``text`` (its file and
    bases, as ``Config.text`` holds them) assigns the top-level ``name``
    from (``num_classes = {{'$NUM_CLASSES:3'}}``: mmengine's
    substitution), or None (the last assignment, the file's own, wins)."""
    # the file's own assignment comes after its bases'
    assigned = re.findall(
        rf'^{re.escape(name)}\s*(?::[^=\n]*)?=(.*)', text or '', re.M
    )
    found = re.search(
        r'\{\{[\'"]?\s*\$(\w+)\s*:', assigned[-1] if assigned else ''
    )
    return found.group(1) if found else None


def stale_variables(cfg: Config, loaded: Config) -> Optional[str]:
    """The warning line for a top-level value changed since the config was
    read (``loaded``) while the keys named like it still hold the old
    value, or None: a config file's variables are used when the file is
    read, so ``--cfg-options data_root=x`` sets ``data_root`` only, and
    ``train_dataloader.dataset.data_root`` keeps what the file gave it
    (as in every tool that merges options with mmengine). The line names
    the environment variable the file reads the value from, if any."""
    for name, value in cfg.items():
        old = loaded.get(name)
        if (
            not isinstance(value, (str, int, float))
            or not isinstance(old, (str, int, float))
            or value == old
        ):
            continue
        named = _keys_given(cfg.filename, name)
        stale = [
            key
            for top, child in cfg.items()
            if top != name
            for key, held in _leaves(child, top)
            if (key.rsplit('.', 1)[-1] == name or key in named) and held == old
        ]
        if not stale:
            continue
        variable = environment_variable(loaded.text, name)
        fix = (
            f'set {variable}={value} in the environment instead (the '
            f'config reads {name} from it), or set those keys'
            if variable
            else 'set those keys instead'
        )
        return (
            f'--cfg-options {name}={value!r} sets {name} only: {few(stale)} '
            f'keep {old!r}, which the file set from {name} when it was '
            f'read; {fix}.'
        )
    return None


def _keys_given(filename: Optional[str], name: str) -> set[str]:
    """The dotted keys that the file ``filename`` itself writes as the
    variable ``name`` (``train_cfg = dict(max_epochs=epochs)``:
    ``train_cfg.max_epochs`` for ``epochs``), where its dicts and lists
    are literals; empty where it cannot be read."""
    try:
        tree = ast.parse(Path(filename or '').read_text())
    except (OSError, SyntaxError, ValueError):
        return set()
    found, pending = set(), []
    for statement in tree.body:
        top = _assigned_name(statement)
        if top is not None and top != name:
            pending.append((top, statement.value))
    while pending:
        key, node = pending.pop()
        if isinstance(node, ast.Name) and node.id == name:
            found.add(key)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, 'id', '') == 'dict'
        ):
            pending += [(f'{key}.{k.arg}', k.value) for k in node.keywords]
        elif isinstance(node, ast.Dict):
            pending += [
                (f'{key}.{k.value}', v)
                for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant)
            ]
        elif isinstance(node, (ast.List, ast.Tuple)):
            pending += [(f'{key}.{i}', v) for i, v in enumerate(node.elts)]
    return found


def file_config(cfg: Config) -> Optional[Config]:
    """``cfg``'s file as it reads now, without options, or None where
    there is none or it fails (a file changed since, or that reads what
    is gone: not judged)."""
    if not cfg.filename or not osp.isfile(cfg.filename):
        return None
    try:
        return Config.fromfile(cfg.filename, import_custom_modules=False)
    except Exception:
        return None


def warn_stale_variables(cfg: Config, loaded: Optional[Config] = None) -> None:
    """Log the line of :func:`stale_variables`, if any, as a warning;
    ``loaded``: the config before the options (its file by default)."""
    loaded = file_config(cfg) if loaded is None else loaded
    warning = loaded is not None and stale_variables(cfg, loaded)
    if warning:
        from mmengine.logging import print_log

        print_log(warning, logger='current', level=logging.WARNING)


def _schedulers(cfg: Config) -> list[tuple[int, dict]]:
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
        for index, scheduler in _schedulers(cfg)
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
    for index, scheduler in _schedulers(cfg):
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


def _describe(path: Union[str, Path], error: Exception) -> str:
    """The ConfigError line of a failure of ``Config.fromfile``."""
    hint = ''
    if isinstance(error, ImportError) and any(
        name in str(error) for name in ('mmdet', 'mmseg')
    ):
        hint = ' (make install-dense installs mmdet and mmseg)'
    elif getattr(error, 'name', None) == 'pkg_resources':
        # mmengine 0.10 resolves `mmpretrain::` bases with pkg_resources,
        # which setuptools 81 removed
        hint = (
            ' (mmengine needs setuptools < 81 for `mmpretrain::` bases: '
            "pip install 'setuptools<81')"
        )
    if isinstance(error, SyntaxError):
        where = f'line {error.lineno}: ' if error.lineno else ''
        text = f'SyntaxError: {where}{error.msg}'
    else:
        text = f'{type(error).__name__}: {error}'
    return ' '.join(f'Cannot load config {path}: {text}{hint}'.split())


# Keys a builder takes from the dict besides the class's arguments.
_BUILDER_KEYS = {'type', '_scope_'}
_EXTRA_KEYS = {
    'loop': {'by_epoch'},  # the Runner picks the loop class with it
    'param scheduler': {'convert_to_iter_based'},
    'hook': {'priority'},
    'model': set(),
    'optimizer': set(),
    'dataset': set(),
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


def _built_dicts(cfg: Config) -> Iterator[tuple[str, dict, str]]:
    """``(dotted key, dict, kind)`` of the dicts of a config that the
    Runner builds from a registry: the loops, hooks, the model, the
    optimizer, the parameter schedulers and the datasets (those a dataset
    wrapper holds too)."""
    train_cfg = cfg.get('train_cfg')
    if isinstance(train_cfg, dict):
        yield 'train_cfg', train_cfg, 'loop'
    for key in ('val_cfg', 'test_cfg'):
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
    for index, scheduler in _schedulers(cfg):
        yield f'param_scheduler.{index}', scheduler, 'param scheduler'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dataset = entry(cfg, loader, 'dataset')
        for key, item in dataset_configs(f'{loader}.dataset', dataset):
            yield key, item, 'dataset'


def _loop_class(key: str, loop: dict) -> Optional[str]:
    """The loop class the Runner builds for a loop dict without a type."""
    if 'type' in loop:
        return loop['type']
    if key == 'train_cfg':
        if 'by_epoch' not in loop:
            return None
        return (
            'EpochBasedTrainLoop'
            if loop['by_epoch']
            else ('IterBasedTrainLoop')
        )
    return 'ValLoop' if key == 'val_cfg' else 'TestLoop'


def argument_problem(
    key: str, item: dict, class_name: str, accepted: set[str], kind: str
) -> Optional[str]:
    """The line for the first key of ``item`` (the config dict at ``key``
    that builds ``class_name``, of ``kind``) that is no argument of the
    class (``accepted``), with the closest one; None if all are."""
    allowed = accepted | _BUILDER_KEYS | _EXTRA_KEYS[kind]
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
    pending = list(_built_dicts(cfg))
    while pending:
        key, item, kind = pending.pop(0)
        name = _loop_class(key, item) if kind == 'loop' else item.get('type')
        if isinstance(name, str):
            scope = item.get('_scope_', cfg.get('default_scope'))
            with registries[kind].switch_scope_and_registry(scope) as found:
                try:
                    cls = found.get(name)
                # the builder reports what cannot be found
                except Exception:
                    cls = None
        else:
            cls = name  # a class itself (a config of read_base())
        if cls is None or not inspect.isclass(cls):
            continue
        accepted = _arguments(cls)
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


def dataset_configs(key: str, dataset: Any) -> Iterator[tuple[str, dict]]:
    """``(dotted key, dict)`` of a dataset config and those it wraps
    (``RepeatDataset``'s ``dataset``, ``ConcatDataset``'s ``datasets``),
    outermost first."""
    if not isinstance(dataset, dict):
        return
    yield key, dataset
    yield from dataset_configs(f'{key}.dataset', dataset.get('dataset'))
    for index, child in enumerate(dataset.get('datasets') or ()):
        yield from dataset_configs(f'{key}.datasets.{index}', child)


def arch_problem(cfg: Config) -> Optional[str]:
    """The line for a T2T-ViT ``arch`` of the model config that is no arch
    name or a custom arch without the keys it needs, listing the names;
    None if every arch resolves."""
    from .archs import resolve_arch

    pending = [('model', cfg.get('model'))]
    while pending:
        key, node = pending.pop(0)
        if not isinstance(node, dict):
            continue
        kind = str(node.get('type', '')).split('.')[-1]
        if kind == 'T2TViT' and 'arch' in node:
            try:
                resolve_arch(node['arch'])
            except ValueError as error:
                return f'{key}.arch: {error}'
        pending += [
            (f'{key}.{name}', child)
            for name, child in node.items()
            if isinstance(child, dict)
        ]
    return None


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


def set_from(cfg: Any, key: str) -> Optional[str]:
    """What sets the dotted ``key`` (``model.head.num_classes``) where
    the config file sets it from a top-level variable of its own: the
    environment variable the file reads that variable from
    (``NUM_CLASSES``), else the variable (``num_classes``); None where the
    file sets the key another way, a base config sets it, or the key was
    given another value since."""
    filename = getattr(cfg, 'filename', None)
    if not filename or not osp.isfile(filename):
        return None
    try:
        text = Path(filename).read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    variables = {
        _assigned_name(statement): statement.value for statement in tree.body
    }
    top, *rest = key.split('.')
    node = variables.get(top)
    for part in rest:
        node = _literal_child(node, part)
    if not isinstance(node, ast.Name) or node.id not in variables:
        return None
    held: Any = cfg
    for part in key.split('.'):
        found, held = _child(held, part)
    if not found or held != cfg.get(node.id):
        return None  # set since, not from the variable
    return environment_variable(text, node.id) or node.id


def _literal_child(node: Optional[ast.expr], part: str) -> Optional[ast.expr]:
    """The node of entry ``part`` of a ``dict(...)``, ``{...}`` or list
    literal node."""
    if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'dict':
        for keyword in node.keywords:
            if keyword.arg == part:
                return keyword.value
    elif isinstance(node, ast.Dict):
        for name, value in zip(node.keys, node.values):
            if isinstance(name, ast.Constant) and name.value == part:
                return value
    elif (
        isinstance(node, (ast.List, ast.Tuple))
        and part.isdigit()
        and int(part) < len(node.elts)
    ):
        return node.elts[int(part)]
    return None


def loop_start(path: str) -> str:
    """A looping path cut at the link that closes the loop."""
    parts = path.split(os.sep)
    for index, part in enumerate(parts):
        if part and part in parts[index + 1 :]:
            return os.sep.join(parts[: parts.index(part, index + 1)])
    return path


def _same_file(path: str, other: str) -> bool:
    """Whether two paths are one file or folder (links resolved, hard
    links included)."""
    try:
        return osp.samefile(path, other)
    except OSError:
        return osp.realpath(path) == osp.realpath(osp.expanduser(other))


def output_problem(
    path: str,
    what: str,
    file: bool = False,
    inputs: Optional[dict[str, str]] = None,
    replaces: Optional[tuple[str, Callable[[str], bool]]] = None,
) -> Optional[str]:
    """Why ``path`` may not be written, in one line naming it as ``what``,
    or None: the one rule for everything a run or tool writes (a work dir,
    ``--out``, ``--out-dir``, an export, a converted checkpoint).

    The path (a ``file``, else a folder) must not be one of ``inputs``
    (``{'the checkpoint': PATH}``, links resolved) nor lie in an input
    folder, must not pass through
    a symbolic link loop or a file, and the folder that holds or would
    hold it must be writable; a file must not be a folder, nor read-only.
    ``replaces=(kind, test)``: an existing file may be replaced only if
    ``test(path)`` says it is of that kind (an earlier output)."""
    path = osp.abspath(osp.expanduser(path))
    for name, given in (inputs or {}).items():
        if given and _same_file(path, given):
            return (
                f'{what} {path} is {name}, an input of this command; give '
                'another path.'
            )
        # what is written in an input folder is read by the next run
        real = osp.realpath(osp.expanduser(given or ''))
        if (
            given
            and osp.isdir(real)
            and osp.realpath(path).startswith(real.rstrip(os.sep) + os.sep)
        ):
            return (
                f'{what} {path} lies in {name} {given}, an input of this '
                'command; give a path outside it.'
            )
    # the existing part of the path, from the root: loops and files
    parts = path.split(os.sep)
    folder = os.sep
    for depth in range(1, len(parts) + 1):
        current = os.sep.join(parts[:depth]) or os.sep
        try:
            mode = os.stat(current).st_mode
        except OSError as error:
            if error.errno == errno.ELOOP:
                return (
                    f'{what} {path}: {loop_start(current)} is a symbolic '
                    'link loop (a link to a folder above it); remove or '
                    'replace the link.'
                )
            break  # does not exist (yet)
        if not stat.S_ISDIR(mode):
            if depth < len(parts) or not file:
                return f'{what} {path}: {current} is a file, not a folder.'
            break
        folder = current
    if osp.isdir(path):
        if file:
            return f'{what} {path} is a folder; give a file name.'
    elif file and osp.exists(path):
        if not os.access(path, os.W_OK):
            return f'{what} {path} is read-only; give another path.'
        if replaces is not None and not replaces[1](path):
            return (
                f'{what} {path} exists and is not {replaces[0]}; give a new '
                'name, or --force to replace it.'
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f'{what} {path}: {folder} is not writable; choose a folder '
            'you can write to.'
        )
    return None

"""Reading a config: the one reader of the tools and APIs, its
``--cfg-options`` and the file's variables, and the small helpers the
checks share to walk a config and word their lines.

Every way ``Config.fromfile`` fails on a user's file (a syntax error, a
``mmdet::`` base of a toolbox that is not installed) becomes one
:class:`ConfigError` line. A config is read and merged with its
``--cfg-options`` exactly as mmengine reads and merges it; a new key close
to one its dict already has is refused with "did you mean"; a variable of
the file given as an option whose keys keep the value it was read with is
one warning line. At module level this file imports only the standard
library and ``mmengine.config``: the tools load it before ``import
t2t_plugin``, whose registration imports mmpretrain's models (seconds, and
mmdet with them where it is installed), so that such mistakes are
answered at once (:mod:`t2t_preflight`).
"""

import ast
import difflib
import logging
import os.path as osp
import re
from collections.abc import Iterable, Iterator
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
            for dotted, _ in leaves(cfg)
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


def leaves(value: Any, path: str = '') -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` of every entry below ``value`` (a config,
    a dict or a list)."""
    if isinstance(value, (dict, Config)):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        dotted = f'{path}.{key}' if path else str(key)
        yield dotted, child
        yield from leaves(child, dotted)


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
        named = file_variables(cfg.filename)
        stale = [
            key
            for key, held in leaves(cfg)
            if key != name
            and (key.rsplit('.', 1)[-1] == name or named.get(key) == name)
            and held == old
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


def file_variables(filename: Optional[str]) -> dict[str, str]:
    """The dotted keys that the file ``filename`` itself sets from a
    top-level variable, each with the variable's name (``train_cfg =
    dict(max_epochs=epochs)``: ``{'train_cfg.max_epochs': 'epochs'}``),
    where its dicts and lists are literals; empty where it cannot be
    read."""
    try:
        tree = ast.parse(Path(filename or '').read_text())
    except (OSError, SyntaxError, ValueError):
        return {}
    found, pending = {}, []
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and statement.value:
            targets = [statement.target]  # ``steps: int = 1``
        else:
            continue
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            pending.append((targets[0].id, statement.value))
    while pending:
        key, node = pending.pop()
        if isinstance(node, ast.Name):
            found[key] = node.id
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


def set_from(cfg: Any, key: str) -> Optional[str]:
    """What sets the dotted ``key`` (``model.head.num_classes``) where
    the config file sets it from a top-level variable of its own
    (:func:`file_variables`): the environment variable the file reads
    that variable from (``NUM_CLASSES``), else the variable
    (``num_classes``); None where the file sets the key another way, a
    base config sets it, or the key was given another value since."""
    variable = file_variables(getattr(cfg, 'filename', None)).get(key)
    if variable is None or variable not in cfg:
        return None
    held: Any = cfg
    for part in key.split('.'):
        found, held = _child(held, part)
    if not found or held != cfg.get(variable):
        return None  # set since, not from the variable
    return environment_variable(cfg.text, variable) or variable

"""The keyword arguments a class takes, read from its installed source
without importing it: the optimizer, scheduler and dataset classes live in
torch, mmengine and mmpretrain, whose imports take seconds, and a
misspelt key of their dicts is answered before them.

The source is parsed with :mod:`ast` and a class's ``**kwargs`` are
followed up its bases, as ``inspect`` would follow them up its MRO. A
class the reader cannot follow (a base built at run time, an attribute of
another module) gives None: its builder judges its keys later.
"""

import ast
import functools
import importlib.util
import os.path as osp
from collections.abc import Iterator
from typing import Optional

# Where a registry's classes of each kind come from, by scope: the
# packages whose ``__init__`` exports them (mmengine's registries hold
# torch's optimizers under their own names).
SOURCES = {
    'optimizer': {
        'mmpretrain': ('mmpretrain.engine.optimizers', 'torch.optim'),
        'mmengine': ('torch.optim',),
    },
    'param scheduler': {
        'mmpretrain': (
            'mmpretrain.engine.schedulers',
            'mmengine.optim.scheduler',
        ),
        'mmengine': ('mmengine.optim.scheduler',),
    },
    'dataset': {
        'mmpretrain': ('t2t_plugin.datasets', 'mmpretrain.datasets'),
        'mmengine': ('mmengine.dataset',),
    },
}


def _module_file(module: str) -> Optional[str]:
    """The source file of ``module`` (a package's ``__init__.py``), found
    from its top-level package without importing anything."""
    top, *rest = module.split('.')
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    base = osp.join(list(spec.submodule_search_locations)[0], *rest)
    for path in (osp.join(base, '__init__.py'), f'{base}.py'):
        if osp.isfile(path):
            return path
    return None


@functools.cache
def _parsed(module: str) -> Optional[ast.Module]:
    path = _module_file(module)
    if path is None:
        return None
    try:
        with open(path, encoding='utf-8') as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an ``import from`` inside ``module`` names."""
    if not node.level:
        return node.module or ''
    parts = module.split('.')
    if not (_module_file(module) or '').endswith('__init__.py'):
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return '.'.join(parts + ([node.module] if node.module else []))


def _find_class(
    module: str, name: str, depth: int = 0
) -> Optional[tuple[str, ast.ClassDef]]:
    """``(module, class node)`` where ``name`` as seen from ``module`` is
    defined, following ``from ... import`` chains."""
    tree = _parsed(module)
    if tree is None or depth > 8:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _find_class(
                        _absolute(module, node), alias.name, depth + 1
                    )
    return None


def _init_arguments(cls: ast.ClassDef) -> Optional[tuple[set[str], bool]]:
    """The argument names of the class's own ``__init__`` and whether it
    takes ``**kwargs``; None without an ``__init__``."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == '__init__':
            args = node.args
            names = {
                arg.arg
                for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
            }
            return names - {'self'}, args.kwarg is not None
    return None


def _line(module: str, cls: ast.ClassDef, seen: set) -> Iterator:
    """The classes of ``cls``'s bases, depth first (the MRO of the single
    and mixin inheritance these packages use); None for one that cannot
    be followed."""
    for base in cls.bases:
        if not isinstance(base, ast.Name):
            yield None
            return
        if base.id == 'object':
            continue
        found = _find_class(module, base.id)
        if found is None:
            yield None
            return
        if (found[0], found[1].name) in seen:
            continue
        seen.add((found[0], found[1].name))
        yield found
        yield from _line(*found, seen)


def class_arguments(kind: str, scope: str, name: str) -> Optional[set[str]]:
    """The keyword arguments of the class ``name`` of ``kind``
    (``'optimizer'``, ``'param scheduler'``, ``'dataset'``) in a config
    of ``scope``, following ``**kwargs`` up its bases; None where the
    class is not found or its arguments are open."""
    scope, _, name = name.rpartition('.') if '.' in name else (scope, '', name)
    for package in SOURCES[kind].get(scope or 'mmpretrain', ()):
        found = _find_class(package, name)
        if found is None:
            continue
        names: set[str] = set()
        for item in [found, *_line(*found, set())]:
            if item is None:
                return None
            own = _init_arguments(item[1])
            if own is None:
                continue
            arguments, open_ended = own
            names |= arguments
            if not open_ended:
                return names
        return None
    return None

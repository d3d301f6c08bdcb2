"""The runtime imports nothing of ``t2t_plugin.models``, directly or
through the modules it imports (their packages' ``__init__`` included):
the model offers what the runtime reads through attributes
(docs/architecture.md)."""

import ast
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

import t2t_plugin

from ..helpers import last_line

PACKAGE = Path(t2t_plugin.__file__).parent


def source(module: str) -> Optional[Path]:
    """The file of a module of the package, or None."""
    path = PACKAGE.parent.joinpath(*module.split('.'))
    for candidate in (path.with_suffix('.py'), path / '__init__.py'):
        if candidate.is_file():
            return candidate
    return None


def imports(module: str) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file,
    relative imports resolved, with their parent packages (whose
    ``__init__`` Python runs first) below ``t2t_plugin`` itself."""
    path = source(module)
    package = (
        module if path.name == '__init__.py' else module.rpartition('.')[0]
    )
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                parts = parts[: len(parts) - node.level + 1]
                base = '.'.join(parts + ([base] if base else []))
            names = [base] + [f'{base}.{alias.name}' for alias in node.names]
        else:
            continue
        for name in names:
            while name.startswith('t2t_plugin.') and source(name):
                found.add(name)
                name = name.rpartition('.')[0]
    return found


def chain_to_models(module: str) -> Optional[list[str]]:
    """The import chain from ``module`` to a module of
    ``t2t_plugin.models``, or None."""
    paths = {module: [module]}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in sorted(imports(current)):
            if name in paths:
                continue
            paths[name] = paths[current] + [name]
            if name.startswith('t2t_plugin.models'):
                return paths[name]
            todo.append(name)
    return None


RUNTIME = sorted(
    '.'.join(path.relative_to(PACKAGE.parent).with_suffix('').parts).replace(
        '.__init__', ''
    )
    for path in (PACKAGE / 'runtime').rglob('*.py')
)


@pytest.mark.parametrize('module', RUNTIME)
def test_the_runtime_imports_nothing_of_the_models(module):
    assert chain_to_models(module) is None


def test_the_check_finds_an_import_of_the_models():
    # the analysis of complexity counts the model's own modules
    chain = chain_to_models('t2t_plugin.analysis.complexity')
    assert chain[0] == 't2t_plugin.analysis.complexity'
    assert chain[-1].startswith('t2t_plugin.models')
    assert 't2t_plugin.runtime.hooks.run_check_hook' in RUNTIME


def test_importing_the_plugin_registers_every_hook():
    """``custom_imports=['t2t_plugin']`` is all a config needs: the import
    registers the hooks the configs name (a fresh process, which has not
    imported ``t2t_plugin.runtime.hooks`` itself)."""
    names = [
        'RunCheckHook', 'RunGuardHook', 'ExactResumeHook',
        'PyramidStrideCheckHook', 'SaveFirstCheckpointHook',
        'ReadableVisualizationHook', 'RunSummaryHook',
    ]  # fmt: skip
    script = (
        'import sys, t2t_plugin\n'
        'from mmpretrain.registry import HOOKS\n'
        'print([n for n in sys.argv[1:] if HOOKS.get(n) is None])\n'
    )
    run = subprocess.run(
        [sys.executable, '-c', script, *names],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
    )
    # the last line: onedl's mmpretrain prints a line on import
    assert last_line(run.stdout) == '[]', run.stderr[-2000:]

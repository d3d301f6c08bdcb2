"""The command-line plumbing lives in ``t2t_plugin.cli`` and only there:
the library (``t2t_plugin.apis`` included) never imports it, never prints
nor ends the process, and ``cli`` defines none of the library's functions.
"""

import ast
import inspect
from pathlib import Path

import pytest
from mmengine.config import Config

import t2t_plugin.apis
from t2t_preflight.arguments import set_default_work_dir

from ..helpers import ROOT

PACKAGE = ROOT / 't2t_plugin'
CLI = PACKAGE / 'cli'
LIBRARY = sorted(
    path for path in PACKAGE.rglob('*.py') if CLI not in path.parents
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imported_modules(path: Path) -> set[str]:
    """The absolute names of what ``path`` imports (relative imports
    resolved against its package)."""
    package = module_name(path).split('.')
    if path.name != '__init__.py':
        package = package[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                package[: len(package) - node.level + 1] if node.level else []
            )
            module = '.'.join([*base, *filter(None, [node.module])])
            names.add(module)
            names.update(f'{module}.{alias.name}' for alias in node.names)
    return names


@pytest.mark.parametrize(
    'path', LIBRARY, ids=lambda path: str(path.relative_to(PACKAGE))
)
def test_the_library_never_imports_the_command_line(path):
    assert not {
        name
        for name in imported_modules(path)
        if name == 't2t_plugin.cli' or name.startswith('t2t_plugin.cli.')
    }


@pytest.mark.parametrize(
    'path',
    sorted((PACKAGE / 'apis').glob('*.py')),
    ids=lambda path: path.name,
)
def test_apis_never_print_parse_arguments_nor_exit(path):
    tree = ast.parse(path.read_text(encoding='utf-8'))
    assert 'argparse' not in imported_modules(path)
    assert 'rich.console' not in imported_modules(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            assert node.id != 'print', f'{path.name}:{node.lineno}'
        if isinstance(node, ast.Attribute):
            assert node.attr not in ('exit', 'stdout', 'stderr'), (
                f'{path.name}:{node.lineno}'
            )


def test_cli_defines_none_of_the_library_functions():
    library = set(t2t_plugin.apis.__all__)
    for name in library:
        owner = inspect.getmodule(getattr(t2t_plugin.apis, name))
        # the light package's checks are library code too (not its options)
        assert owner is None or owner.__name__.startswith(
            (
                't2t_plugin.apis',
                't2t_preflight.config',
                't2t_preflight.errors',
                't2t_preflight.inputs',
            )
        )
    for path in CLI.glob('*.py'):
        tree = ast.parse(path.read_text(encoding='utf-8'))
        defined = {
            node.name
            for node in tree.body
            if isinstance(
                node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)
            )
        }
        assert not defined & library, path.name


@pytest.mark.parametrize(
    'given, in_config, expected',
    [
        ('out/run', None, 'out/run'),
        (None, 'from/config', 'from/config'),
        (None, None, './work_dirs/t2t-vit-7_8xb64_in1k'),
    ],
)
def test_default_work_dir(given, in_config, expected):
    cfg = Config(dict(work_dir=in_config) if in_config else {})
    set_default_work_dir(cfg, 'configs/t2t-vit-7_8xb64_in1k.py', given)
    assert cfg.work_dir == expected

"""Import a script of ``tools/`` as a module, to call it in-process."""
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_tool(relative_path: str) -> ModuleType:
    """The module of ``ROOT / relative_path``, e.g. ``'tools/infer.py'``."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(
        relative_path.replace('/', '_').removesuffix('.py'), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_tool_package(relative_path: str) -> ModuleType:
    """A package folder of ``tools/``, e.g.
    ``'tools/analysis_tools/benchmark_lib'``, imported under its folder name
    (the name its tool imports it by when run as a script)."""
    path = ROOT / relative_path
    name = path.name
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, path / '__init__.py', submodule_search_locations=[str(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

"""Import a script of ``tools/`` as a module, to call it in-process."""
import importlib.util
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

"""Old import paths that still resolve, with a warning naming the new one."""

import importlib
import warnings
from typing import Any, Callable


def moved_attributes(
    package: str, moved: dict[str, tuple[str, str]], advice: str = ''
) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for names that moved elsewhere.

    Args:
        package (str): The module the names were imported from.
        moved (dict): Old name -> (module, name) of its replacement.
        advice (str): Added to the warning, e.g. what to use instead.

    Returns:
        Callable: The ``__getattr__`` to assign in ``package``.
    """

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(
                f'module {package!r} has no attribute {name!r}'
            )
        module, new_name = moved[name]
        warnings.warn(
            f'{package}.{name} moved to {module}.{new_name}; import it from '
            f'there{advice}.',
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), new_name)

    return __getattr__

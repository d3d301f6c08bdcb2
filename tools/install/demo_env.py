"""Whether a Python environment that ``make demo`` did not create (the
active virtual environment, or ``PYTHON=...``) can run the demo as it is.

``make demo`` installs only into the project's own ``.venv``: installing
the tested pins into someone's environment would replace, say, the
torch 2.1 that their prebuilt CUDA mmcv needs. Here the packages the demo
imports are looked up without importing them; if one is missing, one line
says which and how to allow the installation. Exit code 0 when all are
there, 1 otherwise.
"""

import sys
from importlib.util import find_spec

# What the demo imports, by import name, with the distribution to install.
DEMO_MODULES = {
    'torch': 'torch',
    'torchvision': 'torchvision',
    'numpy': 'numpy',
    'PIL': 'Pillow',
    'matplotlib': 'matplotlib',
    'sklearn': 'scikit-learn',
    'rich': 'rich',
    'mmengine': 'mmengine',
    'mmcv': 'mmcv-lite',
    'mmpretrain': 'mmpretrain',
}


def missing_packages() -> list[str]:
    """The distributions of the demo's modules that this Python lacks."""
    return [
        package
        for module, package in DEMO_MODULES.items()
        if find_spec(module) is None
    ]


def main(argv: list[str]) -> int:
    where = argv[0] if argv else sys.prefix
    missing = missing_packages()
    if not missing:
        return 0
    print(
        f'{where} lacks {", ".join(missing)}, and make demo installs only '
        "into the project's own .venv: pip install them there (docs/"
        'install.md), deactivate it to use .venv, or run make demo '
        "DEMO_INSTALL=1 to install make install's pinned versions into it.",
        file=sys.stderr,
    )
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

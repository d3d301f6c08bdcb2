"""This plugin's ``model-index.yml`` in mmpretrain's ``ModelHub``, so that
``get_model``, ``list_models`` and the Inferencers reach its models."""

from pathlib import Path

from mmpretrain.apis import ModelHub

# mmpretrain's own index has ``t2t-vit-t-14_8xb64_in1k`` and friends; a
# second entry of the same name makes ``list_models`` fail.
NAME_SUFFIX = '_t2tp'

_PACKAGE = Path(__file__).resolve().parent


def package_root() -> Path:
    """The folder holding ``model-index.yml``, ``configs/`` and ``tools/``:
    ``t2t_plugin/.mim`` when installed, else the checkout's root."""
    mim = _PACKAGE / '.mim'
    return mim if (mim / 'model-index.yml').is_file() else _PACKAGE.parent


def register_model_index() -> None:
    """Add this plugin's model index to mmpretrain's ``ModelHub``, once,
    as ``import t2t_plugin`` does (a second time, its names would conflict
    with themselves)."""
    root = package_root()
    index = root / 'model-index.yml'
    if index.is_file():  # not in a copy of the package alone
        ModelHub.register_model_index(index, config_prefix=root)

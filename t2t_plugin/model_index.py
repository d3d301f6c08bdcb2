"""This plugin's models in mmpretrain's ``ModelHub``.

``import t2t_plugin`` registers ``model-index.yml`` (one entry per released
official checkpoint, named ``<config>_t2tp``), so that mmpretrain's
``list_models``, ``get_model``, ``inference_model``,
``ImageClassificationInferencer`` and ``FeatureExtractor`` reach them by
name. An installed package reads the index and configs from its ``.mim``
folder (copied there at build time, as OpenMMLab packages do); a source
checkout reads them from the repository root.
"""

from pathlib import Path

from mmpretrain.apis import ModelHub

# Appended to every index name: mmpretrain's own index already has
# ``t2t-vit-t-14_8xb64_in1k`` and friends, and a second entry of the same
# name makes ``list_models`` fail.
NAME_SUFFIX = '_t2tp'

_PACKAGE = Path(__file__).resolve().parent


def package_root() -> Path:
    """The folder holding ``model-index.yml``, ``configs/`` and ``tools/``.

    Returns:
        Path: ``t2t_plugin/.mim`` of an installed package, else the source
        checkout's root.
    """
    mim = _PACKAGE / '.mim'
    return mim if (mim / 'model-index.yml').is_file() else _PACKAGE.parent


def register_model_index() -> None:
    """Add this plugin's model index to mmpretrain's ``ModelHub`` once."""
    root = package_root()
    index = root / 'model-index.yml'
    if not index.is_file():  # e.g. a copy of the package alone
        return
    if any(name.endswith(NAME_SUFFIX) for name in ModelHub._models_dict):
        return
    ModelHub.register_model_index(index, config_prefix=root)

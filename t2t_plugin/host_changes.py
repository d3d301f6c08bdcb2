"""Everything ``import t2t_plugin`` changes outside this package, in one
list, each entry through a public registration API of its host and with
its reason (docs/architecture.md, "What importing changes").

Besides these, the modules of ``models``, ``datasets`` and ``runtime``
register their classes in mmpretrain's and mmengine's registries with the
usual ``@register_module()`` decorators, under names no host class has.
"""

import warnings

# Messages the stack prints on every run, about nothing this plugin uses.
KNOWN_WARNINGS = (
    # mmengine 0.10 resolves ``mmpretrain::`` bases with pkg_resources
    'pkg_resources is deprecated',
    # mmcv-lite lacks the deformable-attention op, which no model here uses
    'Fail to import ``MultiScaleDeformableAttention``',
)


def ignore_known_warnings() -> None:
    """1. Two warning filters (:data:`KNOWN_WARNINGS`), set before the
    hosts are imported, which is when the second one is raised."""
    for message in KNOWN_WARNINGS:
        warnings.filterwarnings(
            'ignore', message=message, category=UserWarning
        )


def register_with_hosts() -> None:
    """2.-6.: what the plugin registers with mmengine, torch and
    mmpretrain once its modules are imported."""
    from mmengine import fileio
    from mmengine.runner import CheckpointLoader

    from .compat import add_safe_globals
    from .model_index import register_model_index
    from .runtime.checkpoint import (
        CHECKPOINT_SCHEMES,
        AtomicLocalBackend,
        checkpoint_safe_globals,
        load_from_t2t_plugin,
    )
    from .runtime.safe_pickle import SafePickleHandler, SafeYamlHandler

    # 2. Every checkpoint scheme of mmengine reads through our reader:
    # mmengine picks a loader by the scheme alone, and its own loaders
    # unpickle with weights_only=False on torch < 2.6 and for every
    # download. Other models' checkpoints read the same here.
    CheckpointLoader.register_scheme(
        ['', 'http://', 'https://', *CHECKPOINT_SCHEMES],
        load_from_t2t_plugin,
        force=True,
    )
    # 3. The configs' CheckpointHook writes through 'atomic_local': a run
    # killed while saving never leaves a truncated checkpoint.
    fileio.register_backend('atomic_local', AtomicLocalBackend, force=True)
    # 4. mmengine reads a dataset's ann_file with the handler of its
    # extension, process-wide (no per-dataset choice); its own pickle and
    # YAML handlers run code a file carries. Files of data read the same.
    fileio.register_handler(['pkl', 'pickle'])(SafePickleHandler)
    fileio.register_handler(['yaml', 'yml'])(SafeYamlHandler)
    # 5. The objects of mmengine's training checkpoints (HistoryBuffer,
    # numpy arrays and dtypes), none of which runs code, for
    # torch.load(weights_only=True): resume, load_from and Pretrained.
    add_safe_globals(checkpoint_safe_globals())
    # 6. This plugin's model-index.yml in mmpretrain's ModelHub, so that
    # get_model, list_models and the Inferencers know its models.
    register_model_index()

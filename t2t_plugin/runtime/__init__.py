"""What runs a training or a test: the runner that seeds augmentation per
sample, its hooks, the one reader of checkpoints (and atomic writes),
the safe readers of data files, the dataset wrappers that guard a run,
the process group of a distributed run, CPU autocast and the layer-decay
optimizer constructor."""

from t2t_preflight import check_config, load_config
from t2t_preflight.errors import CheckpointError, ConfigError, DataFileError

from .checkpoint import (
    AtomicLocalBackend,
    read_checkpoint,
    remove_stale_temp_files,
)
from .hooks import (
    ExactResumeHook,
    PyramidStrideCheckHook,
    ReadableVisualizationHook,
    RunCheckHook,
    RunGuardHook,
    RunSummaryHook,
    SaveFirstCheckpointHook,
)
from .optim_constructor import BackboneLayerDecayOptimWrapperConstructor
from .optim_wrapper import AutocastOptimWrapper
from .safe_pickle import (
    SafePickleHandler,
    SafeYamlHandler,
    load_data_pickle,
)
from .sample_seeded_runner import (
    SampleSeededRunner,
    build_runner,
    newest_intact_checkpoint,
)
from .sample_seeding import (
    SampleSeededDataset,
    SampleSeedSampler,
    own_generator,
    sample_seed,
    sample_seeded_loader,
)
from .skip_bad_images import SkipBadImages

__all__ = [
    'DataFileError',
    'SafePickleHandler',
    'SafeYamlHandler',
    'SampleSeedSampler',
    'SampleSeededDataset',
    'SkipBadImages',
    'load_data_pickle',
    'own_generator',
    'sample_seed',
    'sample_seeded_loader',
    'AtomicLocalBackend',
    'AutocastOptimWrapper',
    'BackboneLayerDecayOptimWrapperConstructor',
    'CheckpointError',
    'ConfigError',
    'ExactResumeHook',
    'PyramidStrideCheckHook',
    'ReadableVisualizationHook',
    'RunCheckHook',
    'RunGuardHook',
    'RunSummaryHook',
    'SaveFirstCheckpointHook',
    'SampleSeededRunner',
    'build_runner',
    'check_config',
    'load_config',
    'newest_intact_checkpoint',
    'read_checkpoint',
    'remove_stale_temp_files',
]

# Runtime shared by every classification config of this project.
# Registries of mmpretrain, with this plugin's modules added on import.
default_scope = 'mmpretrain'
custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # mmengine's CheckpointHook that removes a checkpoint only once the
    # next one is saved; written to a temporary file and renamed, so a run
    # killed while saving never leaves a truncated checkpoint for
    # `--resume` to pick up.
    checkpoint=dict(
        type='SaveFirstCheckpointHook',
        interval=1,
        max_keep_ckpts=3,
        save_best='auto',
        backend_args=dict(backend='atomic_local'),
    ),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    # mmpretrain's VisualizationHook, drawing small images scaled up and
    # named after their class folder (`--show-dir` of any test tool).
    visualization=dict(type='ReadableVisualizationHook', enable=False),
    # Checks before the first step (docs/troubleshooting.md): head and neck
    # widths vs the backbone, classes vs num_classes, empty class folders,
    # sizes the strides cannot tile, loop settings, a resume past the end;
    # the checkpoints exist and fit (another model's or other classes'
    # refused); writable --out / --show-dir; one training per work dir
    # (train.lock).
    run_check=dict(type='RunCheckHook'),
    # Guards during the run: stops a diverging run (5 non-finite losses in
    # a row) and never saves non-finite weights; skips, counts and
    # summarises unusable images of any split (more than max_bad_images
    # different ones stop the run); fails a test whose predictions hold
    # NaN or infinity; stops before a save the disk cannot hold; names the
    # rank that stopped answering in a distributed run.
    run_guard=dict(type='RunGuardHook', max_consecutive=5, max_bad_images=100),
    # Checkpoints carry every random generator's state and the training
    # settings: exact resume; a resume deletes no other run's best
    # checkpoint and names a batch size or learning rate other than the
    # checkpoint's.
    exact_resume=dict(type='ExactResumeHook'),
    # At the end of training: work_dirs/<config>/curves.png (loss, lr,
    # accuracy), best and last top-1, the checkpoint, the curves, the
    # config saved in the work dir and the commands to test, infer and
    # export with them.
    summary=dict(type='RunSummaryHook'),
)

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # tools/train.py switches to gloo on machines without CUDA.
    dist_cfg=dict(backend='nccl'),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)

log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=None, deterministic=False)
# The training data's random augmentation drawn from a seed of (seed, epoch,
# rank, sample): new every epoch, the same whatever the workers, and
# reproduced by a resume (docs/training.md#resume); a resume without a file
# continues from the newest intact checkpoint of the work dir.
runner_type = 'SampleSeededRunner'

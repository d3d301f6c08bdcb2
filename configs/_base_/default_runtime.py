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
    # Stops a diverging run (5 non-finite losses in a row) and never saves
    # non-finite weights.
    non_finite=dict(type='NonFiniteGuardHook', max_consecutive=5),
    # Checkpoints carry every random generator's state: exact resume.
    random_state=dict(type='RandomStateHook'),
    # work_dirs/<config>/curves.png (loss, lr, accuracy) after training.
    curves=dict(type='TrainingCurvesHook'),
    # At the end of training: best and last top-1, the checkpoint, the
    # curves, the config saved in the work dir and the commands to test,
    # infer and export with them.
    summary=dict(type='RunSummaryHook'),
    # Checks before the first step: head and neck widths vs the backbone,
    # classes vs num_classes, empty class folders, sizes the strides cannot
    # tile, loop settings, a resume past the end (docs/troubleshooting.md).
    run_check=dict(type='RunCheckHook'),
    # Checkpoints exist; refuse another model's or other classes'
    # checkpoint, or NaN weights under test.
    checkpoint_check=dict(type='CheckpointCheckHook'),
    # One training per work dir (train.lock); writable --out / --show-dir;
    # room on disk for each checkpoint.
    work_dir=dict(type='WorkDirHook'),
    # A resume deletes no other run's best checkpoint and names a batch
    # size or learning rate other than the checkpoint's.
    resume_guard=dict(type='ResumeGuardHook'),
    # Unreadable or unusable images of any split are skipped, counted and
    # summarised; more than max_bad_images different ones stop the run.
    bad_images=dict(type='BadImageHook', max_bad_images=100),
    # A test whose predictions hold NaN or infinity fails.
    non_finite_outputs=dict(type='NonFiniteOutputHook'),
    # Names the rank that stopped answering in a distributed run.
    rank_heartbeat=dict(type='RankHeartbeatHook'),
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

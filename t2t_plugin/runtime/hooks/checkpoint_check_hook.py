from typing import Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from t2t_preflight import doc_pages
from t2t_preflight.errors import CheckpointError
from t2t_preflight.inputs import checkpoint_problem, few, init_checkpoints

from ...models.backbones import T2TViT
from ...models.checkpoint_checks import RUN_ADVICE, whole_model_error
from ..checkpoint import checkpoint_weights
from .run_checks import (
    RunCheckError,
    bare_model,
    built_loaders,
    is_training,
    start_of,
)


def class_mismatch(checkpoint: dict, classes, path: str) -> Optional[str]:
    """One line when a checkpoint's classes differ from a dataset's, or
    None when they agree or either side does not say."""
    meta = checkpoint.get('meta') or {}
    saved = (meta.get('dataset_meta') or {}).get('classes')
    if saved is None or classes is None or list(saved) == list(classes):
        return None
    return (
        f'{path} was trained on {len(saved)} classes ({few(saved)}), but '
        f'the dataset has {len(classes)} classes ({few(classes)})'
    )


@HOOKS.register_module()
class CheckpointCheckHook(Hook):
    """Check the checkpoints a run reads, when it reads them.

    Before the run, the checkpoint it starts from and the ``init_cfg``
    checkpoints must exist (``start_point`` chooses what a resume without
    a file continues from; under mmengine's Runner, a checkpoint
    ``last_checkpoint`` names that is cut short or lies outside the work
    dir is refused). As it loads, a
    resumed checkpoint must be a training checkpoint of these classes, a
    tested one have the dataset's classes; fine-tuning on other classes gets
    one warning line. Saved checkpoints record the backbone's arch.
    """

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        """Check the files before they are read."""
        start = start_of(runner)
        if start.problem:
            raise RunCheckError(start.problem)
        load_from, resumes = start.load_from, start.resumes
        paths = [load_from] if load_from else []
        if is_training(runner) and not resumes:
            paths += list(init_checkpoints(runner.cfg.get('model')))
        problem = paths and checkpoint_problem(runner.cfg, paths=paths)
        if problem:
            raise RunCheckError(problem)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Record the backbone's arch in ``meta['t2t_arch']``: a load into
        another arch of the same weight shapes (other heads or strides)
        is then refused by the models' load hooks."""
        backbone = getattr(bare_model(runner), 'backbone', None)
        if isinstance(backbone, T2TViT):
            meta = checkpoint.setdefault('meta', {})
            meta['t2t_arch'] = backbone.arch_record()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Check a checkpoint just read, before its weights are loaded."""
        start = start_of(runner)
        path, resumes = start.load_from, start.resumes
        key = 'train_dataloader' if is_training(runner) else 'test_dataloader'
        dataset = getattr(built_loaders(runner).get(key), 'dataset', None)
        classes = getattr(dataset, 'metainfo', {}).get('classes')
        mismatch = class_mismatch(checkpoint, classes, path)
        model = bare_model(runner)
        weights = checkpoint_weights(checkpoint)
        # Shapes, missing weights and non-finite values are the model's own
        # load hooks' to refuse (every loader passes through them); this
        # hook adds what only the run knows: whether it needs the
        # checkpoint's classifier, and the dataset's classes.
        if not is_training(runner) or resumes:
            # a test or a resume needs the classifier as it was trained
            # (a fine-tune's load_from leaves it out, with a warning)
            advice = (
                'resume with the config the run started with'
                if resumes
                else RUN_ADVICE
            )
            # and the model's load hooks see their own parts only: what
            # lies outside them would be left out without a word of ours
            error = whole_model_error(model, weights, advice)
            if error:
                raise error
        if not is_training(runner):
            if mismatch:
                raise CheckpointError(
                    f'{mismatch}; the labels would not match (check the '
                    'dataset folders or the checkpoint).'
                )
        elif resumes:
            meta = checkpoint.get('meta')
            if (
                not isinstance(meta, dict)
                or 'epoch' not in meta
                or 'optimizer' not in checkpoint
            ):
                raise CheckpointError(
                    f'{path} holds weights only (no epoch, optimizer or '
                    'scheduler state), so training cannot resume from it; '
                    'start a new run from its weights with --cfg-options '
                    f'load_from={path} instead of --resume.'
                )
            if mismatch:
                raise CheckpointError(
                    f'{mismatch}; resume only with the dataset the run '
                    'started with.'
                )
        elif mismatch and not getattr(
            whole_model_error(model, weights), 'classes', 0
        ):
            # a classifier of the same number of classes is loaded as it
            # is: other names (or their order) may be a mistake; another
            # number is a fine-tune, which the head's load hook reports
            runner.logger.warning(
                f'load_from: {mismatch}; its head is loaded as it is (to '
                'start a new head, load the backbone only, see '
                f'{doc_pages.WEIGHTS}).'
            )

import os.path as osp

from mmengine.dist import master_only
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ...analysis.curves import find_scalar_files, load_scalars, plot_curves


@HOOKS.register_module()
class TrainingCurvesHook(Hook):
    """Draw the run's loss, learning rate and metrics to a PNG at the end.

    Reads the scalars ``LocalVisBackend`` logged in every start of the run
    and writes ``<work_dir>/<out_file>``, as ``plot_curves.py`` does later.
    Registered in mmengine's root registry, for mmdet and mmseg configs too.

    Args:
        out_file (str): File name in the work dir. Defaults to
            ``'curves.png'``.
    """

    priority = 'VERY_LOW'

    def __init__(self, out_file: str = 'curves.png') -> None:
        self.out_file = out_file

    @master_only
    def after_train(self, runner) -> None:
        """Write the PNG once training (and its last evaluation) is done."""
        files = find_scalar_files(runner.work_dir)
        if not files:
            runner.logger.warning(
                'TrainingCurvesHook found no vis_data/scalars.json in '
                f'{runner.work_dir}; add LocalVisBackend to the visualizer '
                'to get curves.png.'
            )
            return
        train, val = load_scalars(files)
        out_path = plot_curves(
            train,
            val,
            osp.join(runner.work_dir, self.out_file),
            title=osp.basename(osp.normpath(runner.work_dir)),
        )
        runner.logger.info(f'Training curves saved to {out_path}')

import atexit
import json
import os
import os.path as osp
import shutil
import socket
from typing import Any, Optional

import torch
from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from t2t_preflight.outputs import output_problem

from ..checkpoint import remove_stale_temp_files
from ..sample_seeded_runner import checkpoint_folders
from .run_checks import (
    RunCheckError,
    TrainingStopped,
    checkpoint_hook,
    is_training,
    run_mode,
    start_of,
)

LOCK_FILE = 'train.lock'

# The locks this process holds; a process's locks go with it (atexit), and
# a run that failed in a process that goes on (a notebook, a tool called
# in-process) gives them back with release_locks().
_HELD: set = set()


class DiskFullError(TrainingStopped):
    """Too little free space to save a checkpoint."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _release(path: str) -> None:
    _HELD.discard(path)
    try:
        with open(path) as f:
            ours = json.load(f).get('pid') == os.getpid()
        if ours:
            os.remove(path)
    except (OSError, ValueError):  # gone, or taken over meanwhile
        pass


@atexit.register
def release_locks() -> None:
    """Give back the work-dir locks of this process's runs."""
    for path in list(_HELD):
        _release(path)


def _tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(value) for value in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(value) for value in obj)
    return 0


@HOOKS.register_module()
class WorkDirHook(Hook):
    """Guard what a run writes: one training per work dir, output paths
    that can be written, and room for each checkpoint.

    A training holds ``<work_dir>/train.lock`` (process id and host), which
    refuses a second training into the work dir (the lock of a process
    that no longer runs is taken over); once it holds the lock, it removes
    the temporary files a hard kill left beside checkpoints (in the work
    dir, and in the checkpoint hook's ``out_dir``). The ``--out``
    and ``--show-dir`` paths are checked writable before the run, and the
    free space before each checkpoint: a full disk stops training with the
    last one intact.
    """

    priority = 'VERY_HIGH'

    def __init__(self) -> None:
        self.lock: Optional[str] = None

    def before_run(self, runner) -> None:
        """Check the outputs; lock the work dir of a training run."""
        inputs = {
            'the checkpoint': start_of(runner).load_from,
            'the config': runner.cfg.filename,
        }
        for what, path in self._outputs(runner):
            problem = output_problem(
                path, what, file=what == '--out', inputs=inputs
            )
            if problem:
                raise RunCheckError(problem)
        if is_training(runner) and is_main_process():
            self._lock(runner.work_dir)
            folders = checkpoint_folders(
                runner.work_dir, runner.cfg.get('default_hooks')
            )
            for folder in folders:
                removed = remove_stale_temp_files(folder)
                if removed:
                    runner.logger.info(
                        f'Removed {len(removed)} temporary checkpoint '
                        f'file(s) left in {folder} by an interrupted save.'
                    )

    @staticmethod
    def _outputs(runner):
        # test() builds its loop before the hooks run; the property would
        # build (and read) the test set of a training
        loop = runner.test_loop if run_mode(runner) == 'test' else None
        for metric in getattr(getattr(loop, 'evaluator', None), 'metrics', []):
            if getattr(metric, 'out_file_path', None):
                yield '--out', metric.out_file_path
        for hook in runner.hooks:
            if getattr(hook, 'enable', False) or getattr(hook, 'draw', False):
                # mmpretrain's out_dir is taken from the current folder;
                # mmdet's relative test_out_dir lies in the run's log dir
                folder = getattr(hook, 'out_dir', None)
                if not isinstance(folder, str):
                    folder = getattr(hook, 'test_out_dir', None)
                    folder = folder if osp.isabs(str(folder)) else None
                if folder:
                    yield '--show-dir', folder

    def _lock(self, work_dir: str) -> None:
        path = osp.join(work_dir, LOCK_FILE)
        host = socket.gethostname()
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    holder = json.load(f)
            except (OSError, ValueError):
                holder = {}
            pid, where = holder.get('pid'), holder.get('host')
            if (
                isinstance(pid, int)
                and pid != os.getpid()
                and (where != host or _alive(pid))
            ):
                raise RunCheckError(
                    f'{work_dir} is in use by another training (process '
                    f'{pid} on {where}, see {path}); choose another '
                    '--work-dir, or delete the file if that run has ended.'
                ) from None
            # a run that ended without unlocking: take its lock over
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, 'w') as f:
            json.dump(dict(pid=os.getpid(), host=host), f)
        self.lock = path
        _HELD.add(path)

    def after_run(self, runner) -> None:
        """Release the lock."""
        if self.lock is not None:
            _release(self.lock)
            self.lock = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Stop before a save the disk cannot hold."""
        saver = checkpoint_hook(runner)
        folder = getattr(saver, 'out_dir', None) or runner.work_dir
        if '://' in str(folder) or not osp.isdir(folder):
            return
        needed = _tensor_bytes(checkpoint)
        free = shutil.disk_usage(folder).free
        # the atomic backend writes the new file before it replaces the
        # old one; a tenth more for the pickled structure around tensors
        if needed * 1.1 > free:
            raise DiskFullError(
                'Training stopped before saving a checkpoint: it needs about '
                f'{needed / 2**20:.1f} MiB, {folder} has '
                f'{free / 2**20:.1f} MiB free; free some space (or lower '
                'default_hooks.checkpoint.max_keep_ckpts) and resume with '
                '--resume.'
            )

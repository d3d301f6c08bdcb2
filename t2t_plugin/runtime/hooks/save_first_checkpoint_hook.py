from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class SaveFirstCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same arguments, same files), which
    removes a checkpoint only once its successor is saved.

    mmengine's removes the oldest of ``max_keep_ckpts`` checkpoints, and
    the previous best one, before it writes the next: a run killed while
    saving with ``max_keep_ckpts=1`` kept no checkpoint, and ``--resume``
    started it again from scratch. Here the hook keeps one checkpoint more
    while it saves and removes the oldest after the save, and removes the
    previous best checkpoint after the new best one is written.
    ``SampleSeededRunner`` builds a ``CheckpointHook`` of a config as this
    one.
    """

    def __init__(self, *args, max_keep_ckpts: int = -1, **kwargs) -> None:
        self.keep = max_keep_ckpts
        more = max_keep_ckpts + 1 if max_keep_ckpts > 0 else max_keep_ckpts
        super().__init__(*args, max_keep_ckpts=more, **kwargs)

    def after_train_iter(self, runner, *args, **kwargs) -> None:
        super().after_train_iter(runner, *args, **kwargs)
        self._remove_oldest(runner)

    def after_train_epoch(self, runner) -> None:
        super().after_train_epoch(runner)
        self._remove_oldest(runner)

    def after_val_epoch(self, runner, metrics) -> None:
        """mmengine's, with the previous best checkpoint removed after the
        new one is saved (mmengine's removes it before)."""
        before = self._best()
        self._set_best(dict.fromkeys(before))
        super().after_val_epoch(runner, metrics)
        after = self._best()
        for key, old in before.items():
            if after[key] is None:  # no better score: the old one stays
                after[key] = old
            elif old and old != after[key] and self._remove(old):
                runner.logger.info(
                    f'The previous best checkpoint {old} is removed'
                )
        self._set_best(after)
        self._remove_oldest(runner)

    def _best(self) -> dict:
        """The best checkpoint of each metric (the key None: of the only
        one), as mmengine's hook keeps them."""
        if hasattr(self, 'best_ckpt_path'):
            return {None: self.best_ckpt_path}
        return dict(getattr(self, 'best_ckpt_path_dict', {}))

    def _set_best(self, paths: dict) -> None:
        if hasattr(self, 'best_ckpt_path'):
            self.best_ckpt_path = paths[None]
        elif hasattr(self, 'best_ckpt_path_dict'):
            self.best_ckpt_path_dict = paths

    def _remove_oldest(self, runner) -> None:
        kept = getattr(self, 'keep_ckpt_ids', ())  # made by before_train
        if self.keep <= 0 or len(kept) <= self.keep:
            return
        while len(kept) > self.keep:
            step = kept.popleft()
            name = self.filename_tmpl.format(step)
            self._remove(self.file_backend.join_path(self.out_dir, name))
        runner.message_hub.update_info('keep_ckpt_ids', list(kept))

    def _remove(self, path: str) -> bool:
        if not is_main_process():
            return False
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # deepspeed's are folders
            self.file_backend.rmtree(path)
        else:
            return False
        return True

import torch.distributed as torch_dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


def progress_key(rank: int) -> str:
    """The process-group store key of a rank's last finished iteration."""
    return f't2t_progress/{rank}'


@HOOKS.register_module()
class RankProgressHook(Hook):
    """Note each rank's last finished iteration in the process group's
    store.

    When a rank stops answering, the others give up after the
    process-group timeout; the iterations in the store then tell which
    rank fell silent (``tools/train.py`` prints it in one line). Does
    nothing outside distributed runs.
    """

    priority = 'VERY_LOW'

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch=None,
                         outputs=None) -> None:
        """Record ``runner.iter + 1`` for this rank."""
        if torch_dist.is_available() and torch_dist.is_initialized():
            store = torch_dist.distributed_c10d._get_default_store()
            store.set(progress_key(torch_dist.get_rank()),
                      str(runner.iter + 1))

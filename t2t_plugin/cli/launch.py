"""The end of a distributed run of ``tools/train.py`` and ``tools/test.py``
(its start is :class:`~t2t_plugin.runtime.SampleSeededRunner`'s)."""

import torch.distributed as torch_dist


def close_dist() -> None:
    """End a distributed run in step on every rank: a process that exits
    with its group open can leave a gloo thread that aborts at exit
    (SIGABRT), and torchrun then reports the whole run as failed."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()

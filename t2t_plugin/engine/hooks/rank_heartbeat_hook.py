import threading

import torch.distributed as torch_dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

# Seconds between two signs of life of a rank.
HEARTBEAT_INTERVAL = 2.0


def heartbeat_key(rank: int) -> str:
    """The process-group store key that counts a rank's signs of life."""
    return f't2t_heartbeat/{rank}'


def _beat(store, key: str, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_INTERVAL):
        try:
            store.add(key, 1)
        except Exception:  # the store went away with its rank: stop
            return


@HOOKS.register_module()
class RankHeartbeatHook(Hook):
    """Let every rank count its signs of life in the process group's store.

    A background thread adds 1 to this rank's counter every
    :data:`HEARTBEAT_INTERVAL` seconds; when a collective times out, the
    counters that no longer move name the ranks that stopped answering
    (``tools/train.py`` prints them). Does nothing outside distributed runs.
    """

    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self._stop = threading.Event()

    def before_train(self, runner) -> None:
        """Start the heartbeat thread."""
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            return
        store = torch_dist.distributed_c10d._get_default_store()
        threading.Thread(
            target=_beat,
            args=(store, heartbeat_key(torch_dist.get_rank()), self._stop),
            daemon=True,
        ).start()

    def after_train(self, runner) -> None:
        """Stop the heartbeat thread."""
        self._stop.set()

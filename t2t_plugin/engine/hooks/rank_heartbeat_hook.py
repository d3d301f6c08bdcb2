import threading

import torch.distributed as torch_dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ..distributed import HEARTBEAT_INTERVAL, default_store, heartbeat_key


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
    (:class:`~t2t_plugin.engine.SampleSeededRunner` names them in the
    error that ends the run). Does nothing outside distributed runs.
    """

    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self._stop = threading.Event()

    def before_train(self, runner) -> None:
        """Start the heartbeat thread."""
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            return
        store = default_store()
        threading.Thread(
            target=_beat,
            args=(store, heartbeat_key(torch_dist.get_rank()), self._stop),
            daemon=True,
        ).start()

    def after_train(self, runner) -> None:
        """Stop the heartbeat thread."""
        self._stop.set()

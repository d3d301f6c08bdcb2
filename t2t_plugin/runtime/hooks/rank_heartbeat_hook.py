import atexit
import threading
from typing import Optional

import torch.distributed as torch_dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ...compat import default_store
from ..distributed import HEARTBEAT_INTERVAL, heartbeat_key


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
    (:class:`~t2t_plugin.runtime.SampleSeededRunner` names them in the
    error that ends the run). Does nothing outside distributed runs.
    """

    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def before_train(self, runner) -> None:
        """Start the heartbeat thread."""
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            return
        store = default_store()
        self._thread = threading.Thread(
            target=_beat,
            args=(store, heartbeat_key(torch_dist.get_rank()), self._stop),
            daemon=True,
        )
        self._thread.start()
        # A run ended by an error never reaches after_train: stop the
        # thread before the interpreter shuts down, which ends a daemon
        # thread wherever it is, a store call included.
        atexit.register(self.stop)

    def after_train(self, runner) -> None:
        """Stop the heartbeat thread."""
        self.stop()

    def stop(self) -> None:
        """Stop the heartbeat thread and wait for it (a few seconds at
        most)."""
        # once stopped, nothing is left for the exit (and a process that
        # runs many trainings keeps no hook alive for it)
        atexit.unregister(self.stop)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * HEARTBEAT_INTERVAL)

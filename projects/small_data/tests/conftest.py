# The suite's fixtures (tests/conftest.py): the same random state, no
# Runner globals left behind, and the shared builders.
from tests.conftest import (  # noqa: F401
    _config_text_unformatted,
    _no_runner_globals,
    _seed,
    _stop_loader_workers,
    tiny_arch,
    tiny_t2t_vit,
)

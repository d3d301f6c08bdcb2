import gc

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)
    yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The files with the most slow tests first, then those with the most
    tests: pytest-xdist hands out whole files (``--dist loadfile``) in this
    order (``--no-loadscope-reorder``). Its own order, by number of tests
    alone, leaves the files of one long run (a kill and resume, torchrun)
    to the end, where one worker runs them while the other has nothing
    left. After deselection (``-m``): the order of the tests that run."""
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split('::')[0], []).append(item)

    def weight(tests: list) -> tuple[int, int]:
        slow = sum(t.get_closest_marker('slow') is not None for t in tests)
        return slow, len(tests)

    files = sorted(by_file.values(), key=weight, reverse=True)
    items[:] = [item for tests in files for item in tests]


def pytest_collection_finish(session):
    """The objects made so far (torch, the toolboxes, the test modules) are
    left out of later collections: mmengine's datasets run ``gc.collect()``
    at every build, which otherwise walks them all each time (a third of a
    second per dataset in a worker that imported mmdet and mmseg)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope='session')
def _config_text_unformatted():
    """mmengine formats the whole config text with yapf
    (``Config.pretty_text``) for people to read: in the log as a Runner
    starts, in the saved config and in every checkpoint's meta. The text
    before formatting is the same Python, read back to the same config;
    formatting it took 0.7 CPU-s per distinct config, about a sixth of
    this suite's Runner-heavy files. The Runners of this process keep the
    text as it is, as ``Config(format_python_code=False)`` does; the tools
    the suite starts as processes (the demo, torchrun, mim, the documented
    commands) format as they do for users."""
    import mmengine.config.config as config_module
    from yapf.yapflib import yapf_api

    format_code = yapf_api.FormatCode

    def unformatted(text, **kwargs):
        return text, False

    # mmengine 0.10.7 imports it at module level, onedl-mmengine in
    # pretty_text
    patched = [yapf_api]
    if getattr(config_module, 'FormatCode', None) is format_code:
        patched.append(config_module)
    for module in patched:
        module.FormatCode = unformatted
    yield
    for module in patched:
        module.FormatCode = format_code


@pytest.fixture(autouse=True)
def _no_runner_globals():
    """Every test starts without a default registry scope, visualizers or
    loggers: a Runner (or a failed mmdet build) leaves its scope as the
    current one, and a later ``MODELS.build`` would then look in that
    toolbox's registry; see ``helpers.forget_visualizers_and_loggers`` for
    the others. The scope is dropped again as the test ends: a module's
    fixture is made before the next test's own setup."""
    from mmengine.registry import DefaultScope

    from .helpers import forget_visualizers_and_loggers

    DefaultScope._instance_dict.clear()
    forget_visualizers_and_loggers()
    yield
    DefaultScope._instance_dict.clear()


@pytest.fixture(autouse=True)
def _stop_loader_workers():
    """The worker processes that an in-process run leaves running
    (persistent workers) are stopped after its test. torch stops them when
    the loader is collected, but a Runner holds its loaders in reference
    cycles, and the garbage collector (mmengine runs it at every dataset
    build) may close a loader's queues before it tells the workers to
    stop: each worker then waits out torch's 5 s timeout, 15 s after one
    custom-data training here (``helpers.run_main`` stops them after
    each tool run)."""
    from .helpers import stop_loader_workers

    yield
    stop_loader_workers()


# Shared fixtures. Their names are stable: test files of every part of the
# suite use them.
#
# ``tiny_arch(token_layer='performer', **overrides)``: the arch dict of the
#     suite's tiny T2T-ViT (embed 32, 2 layers, 2 heads, MLP 64).
# ``tiny_t2t_vit(token_layer='performer', img_size=32, **kwargs)``: a
#     T2TViT backbone of that arch (T2T token dims 16, no T2T dropout), in
#     eval mode; ``kwargs`` go to ``T2TViT``.
# ``one_epoch``: a work dir of the digits demo trained for one epoch
#     (``helpers.TINY_DEMO``), to copy.
# ``one_thread``: torch computes on one thread during the test
#     (``pytestmark = pytest.mark.usefixtures('one_thread')``).
# ``restore_default_scope``: mmpretrain's default registry scope during
#     the test, whatever scope it switches to.
# A tool is run in-process with ``helpers.run_main(tool, *args)``; only a
# test that needs a real process (a kill, torchrun, a fresh interpreter)
# starts one, with ``helpers.tool_env()`` as its environment.

from .helpers import DEMO, TINY_ARCH, TINY_DEMO, run_main  # noqa: E402


def _tiny_arch(token_layer: str = 'performer', **overrides) -> dict:
    return dict(TINY_ARCH, token_layer=token_layer, **overrides)


@pytest.fixture
def tiny_arch():
    """Builds the tiny arch dict: ``tiny_arch('transformer')``."""
    return _tiny_arch


@pytest.fixture
def tiny_t2t_vit():
    """Builds a tiny T2TViT: ``tiny_t2t_vit('transformer', img_size=64)``."""
    from t2t_plugin.models.backbones import T2TViT

    def build(token_layer='performer', img_size=32, t2t_cfg=None, **kwargs):
        t2t = dict(token_dims=16, drop_rate=0.0, **(t2t_cfg or {}))
        model = T2TViT(
            _tiny_arch(token_layer), img_size=img_size, t2t_cfg=t2t, **kwargs
        )
        return model.eval()

    return build


@pytest.fixture(scope='session')
def one_epoch(tmp_path_factory):
    """A work dir with the tiny demo run for one epoch."""
    work_dir = tmp_path_factory.mktemp('one_epoch')
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO
    )
    assert ours.returncode == 0, ours.stderr[-2000:]
    return work_dir


@pytest.fixture
def one_thread():
    """Torch computes on one thread: the in-process runs of the
    kill-and-resume tests compute as the killed process does
    (``OMP_NUM_THREADS=1``), and the tensors of the dense tests are tiny:
    on two busy cores a second thread costs more than it brings (a Mask
    R-CNN step took 12 s instead of 2.5 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def restore_default_scope():
    """Tests switch to mmdet's or mmseg's default scope; leaving it set would
    make later mmpretrain builds look in the wrong registry."""
    from mmengine.registry import DefaultScope

    with DefaultScope.overwrite_default_scope('mmpretrain'):
        yield

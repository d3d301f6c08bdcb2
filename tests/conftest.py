import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _no_runner_globals():
    """Every test starts without a default registry scope and without
    visualizers: a Runner (or a failed mmdet build) leaves its scope as the
    current one, and a later ``MODELS.build`` would then look in that
    toolbox's registry; see ``helpers.forget_visualizers`` for the
    visualizers."""
    from mmengine.registry import DefaultScope

    from .helpers import forget_visualizers

    DefaultScope._instance_dict.clear()
    forget_visualizers()
    yield


# Shared fixtures. Their names are stable: test files of every part of the
# suite use them.
#
# ``tiny_arch(token_layer='performer', **overrides)``: the arch dict of the
#     suite's tiny T2T-ViT (embed 32, 2 layers, 2 heads, MLP 64).
# ``tiny_t2t_vit(token_layer='performer', img_size=32, **kwargs)``: a
#     T2TViT backbone of that arch (T2T token dims 16, no T2T dropout), in
#     eval mode; ``kwargs`` go to ``T2TViT``.
# A tool is run in-process with ``helpers.run_main(tool, *args)``; only a
# test that needs a real process (a kill, torchrun, a fresh interpreter)
# starts one (``helpers.run_tool``).

from .helpers import TINY_ARCH  # noqa: E402


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

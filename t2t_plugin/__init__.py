"""T2T-ViT for OpenMMLab: importing this package registers its models
in mmpretrain's registries and its model index in mmpretrain's ModelHub."""

import contextlib
import io
import sys
import warnings
from importlib.util import find_spec

# mmengine, mmcv and mmpretrain come from one of two families of
# distributions (setup.py requires neither): name both, not a deep failure.
_MISSING = [
    name for name in ('mmengine', 'mmcv', 'mmpretrain') if not find_spec(name)
]
if _MISSING:
    raise ImportError(
        f't2t_plugin needs {", ".join(_MISSING)}: pip install '
        '"t2t-plugin[openmmlab]" (OpenMMLab 2.x) or "t2t-plugin[onedl]" '
        '(the onedl-* continuation); see docs/install.md.'
    )

# Set before the imports below.
for _message in (
    # mmengine 0.10 resolves ``mmpretrain::`` bases with pkg_resources,
    # which warns on every run; our pin keeps it
    'pkg_resources is deprecated',
    # mmcv-lite lacks the deformable-attention op, which no model here uses
    'Fail to import ``MultiScaleDeformableAttention``',
):
    warnings.filterwarnings('ignore', message=_message, category=UserWarning)


def _import_mmpretrain_datasets() -> None:
    """Import ``mmpretrain.datasets`` without the "Could not import
    OneDL" line that onedl-mmpretrain 1.3.6 prints on every import."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        import mmpretrain.datasets  # noqa: F401
    sys.stdout.write(
        captured.getvalue().replace('Could not import OneDL\n', '', 1)
    )


_import_mmpretrain_datasets()

from . import datasets, engine, models  # noqa: E402, F401
from .compat import warn_if_mmcv_ops_lack_cuda  # noqa: E402
from .model_index import register_model_index  # noqa: E402
from .version import __version__  # noqa: E402

register_model_index()
# mmdet/mmseg ops of a CPU-only mmcv fail on CUDA tensors: say so early.
warn_if_mmcv_ops_lack_cuda()

__all__ = ['__version__']

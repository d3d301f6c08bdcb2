"""T2T-ViT for OpenMMLab: importing this package registers its models
in mmpretrain's registries and its model index in mmpretrain's ModelHub."""

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

from .host_changes import ignore_known_warnings, register_with_hosts  # noqa: E402

ignore_known_warnings()

from . import datasets, models, runtime  # noqa: E402, F401
from .compat import warn_if_mmcv_ops_lack_cuda  # noqa: E402
from .version import __version__  # noqa: E402

register_with_hosts()
# mmdet/mmseg ops of a CPU-only mmcv fail on CUDA tensors: say so early.
warn_if_mmcv_ops_lack_cuda()

__all__ = ['__version__']

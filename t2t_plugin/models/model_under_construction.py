"""The parts a model has built before the neck or head it is building.

OpenMMLab models pass a neck or head nothing of the backbone, whose widths
are needed at construction (lazy modules would miss the optimizer, DDP and
checkpoint loading), so it is looked for in the frames of the calls.
"""

import sys
from typing import Optional

from torch import nn


def built_before(part: nn.Module, name: str) -> Optional[nn.Module]:
    """The ``name`` part (``'backbone'``, ``'neck'``) that the model
    building ``part`` (call this from its ``__init__``) has built already,
    or None."""
    frame = sys._getframe(1)
    for _ in range(16):
        if frame is None:
            return None
        owner = frame.f_locals.get('self')
        if isinstance(owner, nn.Module) and owner is not part:
            # mmdet and mmseg set each part as they build it; mmpretrain's
            # classifiers keep them in locals until all three are built
            found = owner._modules.get(name)
            if found is None:
                found = frame.f_locals.get(name)
            return found if isinstance(found, nn.Module) else None
        frame = frame.f_back
    return None

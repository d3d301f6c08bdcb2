"""The parts a model has built before the neck or head it is building.

mmpretrain's classifiers, mmdet's detectors and mmseg's segmentors build
their backbone, then their neck and head, from separate config dicts, and
pass the later parts nothing of the backbone; the backbone exists by then,
though, in the frame of the model's ``__init__``. Widths are needed at
construction: lazy modules (``nn.LazyLinear``) would leave them unknown
until the first forward, after the optimizer, DDP and checkpoint loading
have needed the parameters. So the model is looked for in the frames of
the calls that lead to the part's ``__init__`` (a handful: the registry's
build, the model's ``__init__``).
"""

import sys
from typing import Optional

from torch import nn


def built_before(part: nn.Module, name: str) -> Optional[nn.Module]:
    """The ``name`` part (``'backbone'``, ``'neck'``) that the model
    building ``part`` has built already, or None (none built, or ``part``
    built on its own).

    Args:
        part (nn.Module): The neck or head being built; call this from its
            ``__init__``.
        name (str): The attribute the model keeps that part in.
    """
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

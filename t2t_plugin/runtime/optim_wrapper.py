from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional, Union

import torch
from mmengine.logging import MMLogger
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS
from torch import nn


def cpu_has_fast_bf16(cpuinfo_path: str = '/proc/cpuinfo') -> Optional[bool]:
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16
    or AMX-BF16 on x86, BF16 on Arm), by its flags; without
    ``/proc/cpuinfo``, by torch's AVX512-BF16 probe; None if unknown."""
    try:
        with open(cpuinfo_path) as cpuinfo:
            flags = set(cpuinfo.read().lower().split())
    except OSError:
        probe = getattr(torch.cpu, '_is_avx512_bf16_supported', None)
        return bool(probe()) if probe is not None else None
    return bool(flags & {'avx512_bf16', 'amx_bf16', 'bf16'})


@OPTIM_WRAPPERS.register_module()
class AutocastOptimWrapper(OptimWrapper):
    """Optimizer wrapper that runs forward passes under ``torch.autocast``.

    mmengine's ``AmpOptimWrapper`` refuses to start without an accelerator
    and always brings a gradient scaler; bfloat16 autocast, the only one
    CPUs offer, needs no loss scaling. Registered in mmengine's root
    registry, for configs of any OpenMMLab scope.

    Args:
        dtype (str | torch.dtype): Autocast type. Defaults to
            ``'bfloat16'``.
        device_type (str, optional): ``'cpu'`` or ``'cuda'``; None picks
            ``'cuda'`` when it is available. Defaults to None.
        **kwargs: Arguments of :class:`mmengine.optim.OptimWrapper`
            (``optimizer``, ``clip_grad``, ``accumulative_counts``).
    """

    def __init__(
        self,
        dtype: Union[str, torch.dtype] = 'bfloat16',
        device_type: Union[str, None] = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.cast_dtype = (
            getattr(torch, dtype) if isinstance(dtype, str) else dtype
        )
        if not isinstance(self.cast_dtype, torch.dtype):
            raise TypeError(f'dtype must name a torch dtype, got {dtype!r}.')
        self.device_type = device_type or (
            'cuda' if torch.cuda.is_available() else 'cpu'
        )
        if (
            self.device_type == 'cpu'
            and self.cast_dtype == torch.bfloat16
            and cpu_has_fast_bf16() is False
        ):
            MMLogger.get_current_instance().warning(
                'bf16 autocast on a CPU without native bfloat16 (no '
                'AVX512-BF16 or AMX): steps can be tens of times slower '
                'than float32 (a small RetinaNet step: over 6 min against '
                '7 s); train without --amp.'
            )

    @contextmanager
    def optim_context(self, model: nn.Module) -> Iterator[None]:
        """Gradient-sync context of the base class plus autocast."""
        with (
            super().optim_context(model),
            torch.autocast(
                device_type=self.device_type, dtype=self.cast_dtype
            ),
        ):
            yield

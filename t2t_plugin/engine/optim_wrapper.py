from collections.abc import Iterator
from contextlib import contextmanager
from typing import Union

import torch
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS
from torch import nn


@OPTIM_WRAPPERS.register_module()
class AutocastOptimWrapper(OptimWrapper):
    """Optimizer wrapper that runs forward passes under ``torch.autocast``.

    mmengine's ``AmpOptimWrapper`` refuses to start without an accelerator
    and always brings a gradient scaler. Autocast to bfloat16 needs no loss
    scaling (it keeps float32's exponent range), and it is the only autocast
    that CPUs offer; this wrapper provides exactly that, on the device the
    model lives on. It is registered in mmengine's root registry, so configs
    of any OpenMMLab scope can use it.

    Args:
        dtype (str | torch.dtype): Autocast type. Defaults to
            ``'bfloat16'``.
        device_type (str, optional): ``'cpu'`` or ``'cuda'``; None picks
            ``'cuda'`` when it is available. Defaults to None.
        **kwargs: Arguments of :class:`mmengine.optim.OptimWrapper`
            (``optimizer``, ``clip_grad``, ``accumulative_counts``).
    """

    def __init__(self,
                 dtype: Union[str, torch.dtype] = 'bfloat16',
                 device_type: Union[str, None] = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.cast_dtype = (getattr(torch, dtype)
                           if isinstance(dtype, str) else dtype)
        if not isinstance(self.cast_dtype, torch.dtype):
            raise TypeError(f'dtype must name a torch dtype, got {dtype!r}.')
        self.device_type = device_type or (
            'cuda' if torch.cuda.is_available() else 'cpu')

    @contextmanager
    def optim_context(self, model: nn.Module) -> Iterator[None]:
        """Gradient-sync context of the base class plus autocast.

        Args:
            model (nn.Module): The model being trained.
        """
        with super().optim_context(model), torch.autocast(
                device_type=self.device_type, dtype=self.cast_dtype):
            yield

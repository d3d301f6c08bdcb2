"""Repeatable inference and training steps, their time and peak tensor
memory (the tensors alive when a step starts plus the most allocated during
it), as ``tools/analysis_tools/benchmark.py`` reports them."""

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from itertools import accumulate

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from t2t_plugin.compat import grad_scaler, profiler_event_start_ns

DTYPES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}


class StepRunner:
    """One inference or training step of a model, callable again and again.

    A training step is forward, backward and an ``AdamW`` step on the mean
    square of the first output. The learning rate is 0: AdamW does all its
    arithmetic, but every repeat computes on the loaded weights. ``dtype``
    is ``'fp32'``, or ``'bf16'`` / ``'fp16'`` autocast.
    """

    def __init__(
        self, model: nn.Module, images: torch.Tensor, train: bool, dtype: str
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(
                f'Unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}.'
            )
        self.model = model
        self.images = images
        self.train = train
        self.device = images.device
        self.amp_dtype = DTYPES[dtype]
        # mmpretrain 1.2.0 backbones return None from train(): no chaining
        model.train(train)
        # gradients of an earlier step would count as live memory of this one
        model.zero_grad(set_to_none=True)
        self.optimizer = self.scaler = None
        if train:
            params = [p for p in model.parameters() if p.requires_grad]
            self.optimizer = torch.optim.AdamW(params, lr=0.0)
            if self.amp_dtype == torch.float16:
                self.scaler = grad_scaler(self.device.type)

    def __call__(self) -> None:
        autocast = torch.autocast(
            self.device.type,
            dtype=self.amp_dtype,
            enabled=self.amp_dtype is not None,
        )
        if not self.train:
            with torch.inference_mode(), autocast:
                self.model(self.images)
            return
        self.optimizer.zero_grad(set_to_none=True)
        with autocast:
            output = self.model(self.images)
        # backbones return a tuple of outputs, the official model a tensor
        if isinstance(output, (tuple, list)):
            output = output[0]
        loss = output.float().square().mean()
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

    def live_tensors(self) -> Iterator[torch.Tensor]:
        """The tensors that stay alive between steps."""
        yield self.images
        yield from self.model.parameters()
        yield from self.model.buffers()
        for param in self.model.parameters():
            if param.grad is not None:
                yield param.grad
        if self.optimizer is not None:
            for state in self.optimizer.state.values():
                yield from filter(torch.is_tensor, state.values())


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels, so that a clock reading means something."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_steps(step: StepRunner, iters: int) -> float:
    """Seconds that ``iters`` consecutive calls of ``step`` take."""
    synchronize(step.device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    synchronize(step.device)
    return time.perf_counter() - start


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    storages = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2, where the profiler's C++ backend logs."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, 'w') as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_memory(step: StepRunner) -> int:
    """Peak tensor memory of one call of ``step``, in bytes; call it after
    a warm-up step, so that gradients and optimizer state exist."""
    baseline = tensor_bytes(step.live_tensors())
    device = step.device
    if device.type == 'cuda':
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        synchronize(device)
        return baseline + torch.cuda.max_memory_allocated(device) - before
    if device.type != 'cpu':
        raise ValueError(
            f'Peak memory is measured on cpu and cuda only, not {device.type}.'
        )
    cpu = [ProfilerActivity.CPU]
    with _quiet_stderr(), profile(activities=cpu, profile_memory=True) as p:
        step()
    # a CPU step allocates on the CPU only: every memory event counts
    events = sorted(
        (profiler_event_start_ns(event), event.nbytes())
        for event in p.profiler.kineto_results.events()
        if event.name() == '[memory]'
    )
    return baseline + max([0, *accumulate(n for _, n in events)])

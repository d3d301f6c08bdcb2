"""Repeatable inference and training steps, their time, measured alone or
in alternating rounds beside other models, their peak tensor memory (the
tensors alive when a step starts plus the most allocated during it) and the
operators they spend it in, as ``tools/analysis_tools/benchmark.py``
reports them."""

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Optional

import torch
from mmengine.model import BaseModel
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

    With ``data_samples`` (their labels), ``model`` is an mmengine
    ``BaseModel`` such as mmpretrain's ``ImageClassifier`` and a step is
    what its training loop does: the images (raw pixels) through the
    model's data preprocessor, then ``mode='loss'`` and the sum of its
    losses in training, ``mode='tensor'`` in inference.
    """

    def __init__(
        self,
        model: nn.Module,
        images: torch.Tensor,
        train: bool,
        dtype: str,
        data_samples: Optional[Sequence] = None,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(
                f'Unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}.'
            )
        if data_samples is not None and not isinstance(model, BaseModel):
            raise ValueError(
                f'{type(model).__name__} has no data preprocessor and no loss '
                'mode; give data samples only with an mmengine BaseModel '
                '(an ImageClassifier).'
            )
        self.model = model
        self.images = images
        self.data_samples = data_samples
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
                if self.data_samples is None:
                    self.model(self.images)
                else:
                    self.model(self._preprocessed()['inputs'], mode='tensor')
            return
        self.optimizer.zero_grad(set_to_none=True)
        with autocast:
            if self.data_samples is None:
                output = self.model(self.images)
            else:
                losses = self.model(**self._preprocessed(), mode='loss')
        if self.data_samples is None:
            # backbones return a tuple of outputs, the official model a tensor
            if isinstance(output, (tuple, list)):
                output = output[0]
            loss = output.float().square().mean()
        else:
            loss, _ = self.model.parse_losses(losses)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

    def _preprocessed(self) -> dict:
        data = dict(inputs=self.images, data_samples=self.data_samples)
        return self.model.data_preprocessor(data, self.train)

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


def alternating_rounds(
    steps: Mapping[str, StepRunner], rounds: int, iters: int
) -> dict[str, list[float]]:
    """Seconds of ``iters`` calls of each step, in ``rounds`` rounds that
    take the steps in turn (A, B, A, B, ...), so that a change of the
    machine's load hits all of them alike; one list per step, a value per
    round."""
    seconds = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            seconds[name].append(time_steps(step, iters))
    return seconds


@dataclass
class OpTime:
    """One operator's share of a step: its own time (children excluded)
    and calls, per step."""

    name: str
    self_ms: float
    share: float
    calls: float


def top_operators(step: StepRunner, calls: int, top: int) -> list[OpTime]:
    """The ``top`` operators by own time over ``calls`` calls of ``step``
    (torch.profiler, CPU time), per step; ``share`` is of the whole time
    the profiler saw."""
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(calls):
            step()
    events = [e for e in p.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [
        OpTime(
            event.key,
            event.self_cpu_time_total / 1e3 / calls,
            event.self_cpu_time_total / total,
            event.count / calls,
        )
        for event in events[:top]
    ]


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

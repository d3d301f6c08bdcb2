"""tools/analysis_tools/benchmark.py and the step runner it times.

No timing is asserted: this machine's speed is not a test result. The
clock is replaced where a rate is checked.
"""

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2t_plugin.analysis.speed import StepRunner, peak_memory, tensor_bytes

from ..helpers import run_main, write_tiny_model


class _Allocator(nn.Module):
    """Allocates a known 4 MiB temporary per call."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))

    def forward(self, x):
        temporary = torch.ones(1024, 1024)
        return x * self.weight.sum() + temporary[0, 0]


def test_peak_memory_counts_live_tensors_and_temporaries():
    images = torch.randn(2, 3, 8, 8)
    step = StepRunner(_Allocator(), images, train=False, dtype='fp32')
    step()
    baseline = tensor_bytes(step.live_tensors())
    assert baseline == images.numel() * 4 + 8 * 4
    extra = peak_memory(step) - baseline
    # the temporary, plus the output and a few scalars
    assert 4 * 2**20 <= extra < 4 * 2**20 + 4096


def test_training_step_keeps_weights_and_fills_gradients(tiny_t2t_vit):
    model = tiny_t2t_vit('performer')
    before = {k: v.clone() for k, v in model.state_dict().items()}
    step = StepRunner(
        model, torch.randn(2, 3, 32, 32), train=True, dtype='fp32'
    )
    step()
    step()
    assert all(p.grad is not None for p in model.parameters())
    assert len(step.optimizer.state) == len(list(model.parameters()))
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_bf16_training_step_computes_in_bf16(tiny_t2t_vit):
    model = tiny_t2t_vit('transformer')
    # torch 2.14 with ATEN_CPU_CAPABILITY below what the CPU has (default on
    # an AVX-512 CPU) refuses bf16 attention: 'pack_vnni2 is only supported
    # when avx512 is supported'; a real CPU is never in that state
    query = torch.zeros(1, 1, 64, 16, dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(query, query, query)
    except RuntimeError as error:
        pytest.skip(f'torch runs no bf16 attention here: {error}')
    dtypes = []
    model.encoder[0].ffn.register_forward_hook(
        lambda module, inputs, output: dtypes.append(output.dtype)
    )
    step = StepRunner(
        model, torch.randn(2, 3, 32, 32), train=True, dtype='bf16'
    )
    step()
    assert dtypes == [torch.bfloat16]
    # the weights stay float32 and get float32 gradients
    assert {p.grad.dtype for p in model.parameters()} == {torch.float32}


def test_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match=r"Unknown dtype 'fp8'; choose one"):
        StepRunner(_Allocator(), torch.ones(1, 8), train=False, dtype='fp8')


def test_tool_reports_the_rate_and_memory_of_the_config_model(
    tmp_path, monkeypatch
):
    config, _, model = write_tiny_model(tmp_path)
    # every timed run of 3 steps takes half a second (the tool imports the
    # patched function when run_main loads it)
    monkeypatch.setattr(
        't2t_plugin.analysis.speed.time_steps', lambda step, iters: 0.5
    )
    out_json = tmp_path / 'speed.json'
    result = run_main(
        'analysis_tools/benchmark',
        str(config),
        '--batch-size',
        '2',
        '--iters',
        '3',
        '--warmup',
        '0',
        '--threads',
        '1',
        '--modes',
        'infer',
        'train',
        '--json',
        str(out_json),
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(out_json.read_text())
    assert [(r['mode'], r['dtype']) for r in rows] == [
        ('infer', 'fp32'),
        ('train', 'fp32'),
    ]
    params = sum(p.numel() for p in model.parameters()) * 4
    buffers = sum(b.numel() for b in model.buffers()) * 4
    images = 2 * 3 * 32 * 32 * 4
    for row in rows:
        assert row['images_per_s'] == 2 * 3 / 0.5
        assert (row['img_size'], row['threads']) == (32, 1)
    # inference holds at least weights, buffers and images; training adds
    # gradients and AdamW's two moments of every weight
    infer, train = (r['peak_memory_mib'] * 2**20 for r in rows)
    assert infer >= params + buffers + images
    assert train >= 4 * params + buffers + images
    assert f'Rows saved to {out_json}' in result.stdout


@pytest.mark.parametrize(
    'args, message',
    [
        (
            ['--batch-size', '0'],
            'error: --batch-size must be at least 1, got 0',
        ),
        (['--dtypes', 'fp8'], "invalid choice: 'fp8'"),
    ],
)
def test_bad_options_are_refused(args, message):
    result = run_main('analysis_tools/benchmark', 'cfg.py', *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_missing_config_is_one_line(tmp_path):
    result = run_main('analysis_tools/benchmark', str(tmp_path / 'none.py'))
    assert result.returncode == 1
    assert result.stderr == (
        f'benchmark.py: error: Config file not found: {tmp_path}/none.py.\n'
    )

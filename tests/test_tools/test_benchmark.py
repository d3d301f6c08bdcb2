"""tools/analysis_tools/benchmark.py and the step runner it times.

No timing is asserted: this machine's speed is not a test result. The
clock is replaced where a rate is checked.
"""

import json
import os
import statistics

import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample
from torch import nn
from torch.nn import functional as F

from t2t_plugin.analysis.speed import (
    DTYPES,
    StepRunner,
    alternating_rounds,
    peak_memory,
    tensor_bytes,
    top_operators,
)

from ..helpers import (
    MEAN,
    ROOT,
    STD,
    load_tool,
    run_main,
    write_tiny_model,
)


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


def test_classifier_step_trains_its_loss_on_preprocessed_images(tmp_path):
    config, _, _ = write_tiny_model(tmp_path, num_classes=3)
    cfg = Config.fromfile(str(config))
    cfg.model.data_preprocessor = cfg.data_preprocessor
    model = MODELS.build(cfg.model)
    images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    samples = [DataSample().set_gt_label(label) for label in (0, 2)]
    seen, losses = [], []
    model.backbone.register_forward_pre_hook(
        lambda module, inputs: seen.append(inputs[0])
    )
    model.head.register_forward_hook(
        lambda module, inputs, output: losses.append(output)
    )
    step = StepRunner(model, images, True, 'fp32', samples)
    step()
    # BGR -> RGB, then (x - mean) / std: the config's data preprocessor
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    expected = (images.flip(1).float() - mean) / std
    torch.testing.assert_close(seen[0], expected)
    # the head ran in loss mode, on the samples' labels
    assert set(model.head.loss(model.extract_feat(seen[0]), samples)) == {
        'loss'
    }
    assert all(p.grad is not None for p in model.parameters())
    StepRunner(model, images, False, 'fp32', samples)()
    assert len(seen) == 3 and seen[2].dtype == torch.float32


def test_data_samples_need_a_base_model():
    with pytest.raises(
        ValueError, match='_Allocator has no data preprocessor'
    ):
        StepRunner(_Allocator(), torch.ones(1, 8), False, 'fp32', [])


def test_alternating_rounds_take_the_steps_in_turn(monkeypatch):
    calls = []
    monkeypatch.setattr(
        't2t_plugin.analysis.speed.time_steps',
        lambda step, iters: calls.append((step, iters)) or len(calls),
    )
    seconds = alternating_rounds({'a': 'A', 'b': 'B'}, rounds=3, iters=4)
    assert calls == [('A', 4), ('B', 4)] * 3
    assert seconds == {'a': [1, 3, 5], 'b': [2, 4, 6]}


def test_top_operators_are_a_share_of_the_step(tiny_t2t_vit):
    step = StepRunner(
        tiny_t2t_vit('performer'), torch.randn(2, 3, 32, 32), True, 'fp32'
    )
    step()
    ops = top_operators(step, calls=2, top=4)
    assert len(ops) == 4
    times = [op.self_ms for op in ops]
    assert times == sorted(times, reverse=True) and times[-1] > 0
    assert 0 < sum(op.share for op in ops) <= 1
    # one LayerNorm per T2T and encoder layer, two per layer, and the
    # final one: each step calls layer norm 2 * (2 + 2) + 1 times
    norm = top_operators(step, calls=2, top=1000)
    calls = {op.name: op.calls for op in norm}
    assert calls['aten::native_layer_norm'] == 2 * (2 + 2) + 1


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


def test_compare_measures_configs_side_by_side(tmp_path, monkeypatch):
    first, _, first_model = write_tiny_model(tmp_path, num_classes=3)
    other, _, other_model = write_tiny_model(
        tmp_path, num_classes=3, token_layer='transformer'
    )
    # a round of a model takes 1 us per parameter, 3 us for the second
    # round: the ratio is that of the parameter counts
    rounds = {}

    def seconds(step, iters):
        key = id(step)
        rounds[key] = rounds.get(key, 0) + 1
        size = sum(p.numel() for p in step.model.parameters())
        return size * 1e-6 * (3 if rounds[key] == 2 else 1)

    monkeypatch.setattr('t2t_plugin.analysis.speed.time_steps', seconds)
    out_json = tmp_path / 'speed.json'
    result = run_main(
        'analysis_tools/benchmark',
        first,
        '--compare',
        other,
        '--batch-size',
        '2',
        '--iters',
        '2',
        '--rounds',
        '3',
        '--warmup',
        '0',
        '--modes',
        'train',
        'infer',
        '--threads',
        '1',
        'all',
        '--json',
        out_json,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(out_json.read_text())
    size = {
        'tiny_performer_3': sum(p.numel() for p in first_model.parameters()),
        'tiny_transformer_3': sum(p.numel() for p in other_model.parameters()),
    }
    assert [(r['threads'], r['mode'], r['config']) for r in rows] == [
        (threads, mode, config)
        for threads in (1, os.cpu_count())
        for mode in ('train', 'infer')
        for config in ('tiny_performer_3', 'tiny_transformer_3')
    ]
    for row in rows:
        median = statistics.median([1, 3, 1]) * size[row['config']] * 1e-6
        assert row['images_per_s'] == pytest.approx(2 * 2 / median)
        assert row['best_images_per_s'] == pytest.approx(
            2 * 2 / (size[row['config']] * 1e-6)
        )
        assert row['params'] == size[row['config']]
        assert row['macs'] > 0
        if row['config'] == 'tiny_performer_3':
            assert row['first_over_this'] is None
        else:
            assert row['first_over_this'] == pytest.approx(
                size['tiny_transformer_3'] / size['tiny_performer_3']
            )
    header = next(
        line for line in result.stdout.splitlines() if 'images/s' in line
    )
    for column in ('config', 'threads', 'best', 'first x', 'params', 'MACs'):
        assert column in header
    assert 'first x: the images/s of tiny_performer_3 over' in result.stdout


def test_profile_lists_the_training_step_operators(tmp_path):
    config, _, _ = write_tiny_model(tmp_path)
    out_json = tmp_path / 'speed.json'
    result = run_main(
        'analysis_tools/benchmark',
        config,
        '--batch-size',
        '2',
        '--iters',
        '1',
        '--warmup',
        '1',
        '--modes',
        'train',
        '--profile',
        '3',
        '--json',
        out_json,
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(out_json.read_text())
    assert len(row['top_operators']) == 3
    assert 'the 3 operators with the most own time' in result.stdout
    assert row['top_operators'][0]['name'] in result.stdout


def test_the_tool_offers_the_dtypes_the_step_runner_knows():
    """The tool names them before it imports the step runner."""
    benchmark = load_tool('tools/analysis_tools/benchmark.py')
    assert sorted(benchmark.DTYPE_NAMES) == sorted(DTYPES)


@pytest.mark.parametrize(
    'args, message',
    [
        (
            ['--batch-size', '0'],
            'error: argument --batch-size: must be at least 1, got 0',
        ),
        (['--dtypes', 'fp8'], "invalid choice: 'fp8'"),
        (
            ['--rounds', '0'],
            'error: argument --rounds: must be at least 1, got 0',
        ),
        (
            ['--threads', '0'],
            "a thread count is a positive number or 'all', got '0'",
        ),
        (
            ['--profile', '5'],
            'error: --profile lists a training step: add train to --modes',
        ),
    ],
)
def test_bad_options_are_refused(args, message):
    result = run_main('analysis_tools/benchmark', 'cfg.py', *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_missing_compared_config_is_one_line(tmp_path):
    config, _, _ = write_tiny_model(tmp_path)
    result = run_main(
        'analysis_tools/benchmark',
        config,
        '--compare',
        tmp_path / 'none.py',
    )
    assert result.returncode == 1
    assert result.stderr == (
        f'benchmark.py: error: Config file not found: {tmp_path}/none.py.\n'
    )


def test_a_config_compared_with_itself_is_one_line(tmp_path):
    config, _, _ = write_tiny_model(tmp_path)
    result = run_main('analysis_tools/benchmark', config, '--compare', config)
    assert result.returncode == 2
    assert result.stderr == (
        f'benchmark.py: error: {config} is measured twice (as '
        'tiny_performer_10); compare different configs\n'
    )


def test_missing_config_is_one_line(tmp_path):
    result = run_main('analysis_tools/benchmark', str(tmp_path / 'none.py'))
    assert result.returncode == 1
    assert result.stderr == (
        f'benchmark.py: error: Config file not found: {tmp_path}/none.py.\n'
    )


def test_a_misspelt_model_key_is_one_line_before_building(tmp_path):
    """A key of the model that its class does not take: the line names it
    with the nearest argument, no traceback of the build."""
    lite = ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py'
    result = run_main(
        'analysis_tools/benchmark', lite,
        '--cfg-options', 'model.backbone.frozen_stage=1',
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        'benchmark.py: error: model.backbone.frozen_stage: T2TViT takes no '
        "argument 'frozen_stage'; did you mean 'frozen_stages'?\n"
    )

"""The comparison benchmark and its library: references, ceiling, CLI.

No timing is asserted anywhere: this machine's speed is not a test result.
"""

import json
import os
import statistics
import subprocess
import sys

import pytest
import torch

from t2t_plugin.analysis import count_complexity
from t2t_plugin.converters import convert_official_state_dict
from t2t_plugin.models.backbones import T2TViT
from tests.helpers import ROOT, load_tool, load_tool_package

benchmark_lib = load_tool_package('.dev_scripts/benchmark_lib')
build_mmpretrain_reference = benchmark_lib.build_mmpretrain_reference
matmul_gflops = benchmark_lib.matmul_gflops
plugin_to_official_state_dict = benchmark_lib.plugin_to_official_state_dict

TOOL = ROOT / '.dev_scripts' / 'compare_implementations.py'
TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def _tiny(token_layer, img_size=32):
    return T2TViT(dict(TINY, token_layer=token_layer), img_size=img_size)


@pytest.mark.parametrize('token_layer', ['transformer', 'performer'])
def test_official_key_layout_round_trips_through_converter(token_layer):
    model = _tiny(token_layer)
    state_dict = model.state_dict()
    official = plugin_to_official_state_dict(state_dict, token_layer)
    assert 'blocks.1.mlp.fc2.weight' in official
    assert not any(key.startswith('encoder.') for key in official)
    if token_layer == 'performer':
        assert 'tokens_to_token.attention1.w' in official
        assert 'tokens_to_token.attention2.mlp.2.bias' in official
    else:
        assert 'tokens_to_token.attention1.attn.qkv.weight' in official
        assert 'tokens_to_token.attention2.mlp.fc1.weight' in official
    # the converter of official releases must undo the renaming exactly
    back, _ = convert_official_state_dict(official, num_heads=2)
    assert list(back) == [f'backbone.{key}' for key in state_dict]
    for key, value in state_dict.items():
        assert back[f'backbone.{key}'] is value


def test_mmpretrain_reference_holds_our_weights():
    model = _tiny('transformer', img_size=64)
    reference = build_mmpretrain_reference(model)
    ours = model.state_dict()
    theirs = reference.state_dict()
    assert set(ours) == set(theirs)
    for key, value in ours.items():
        assert torch.equal(value, theirs[key]), key
    reference.eval()
    with torch.no_grad():
        out = reference(torch.randn(2, 3, 64, 64))
    assert out[0].shape == (2, 32)


def test_mmpretrain_reference_refuses_performer():
    with pytest.raises(ValueError, match='only transformer'):
        build_mmpretrain_reference(_tiny('performer'))


def test_matmul_ceiling_is_the_fastest_products_rate(monkeypatch):
    ceiling = sys.modules['benchmark_lib.ceiling']
    # a clock that advances 1 ms per reading: every product takes 1 ms
    ticks = iter(range(10**6))
    monkeypatch.setattr(
        ceiling.time, 'perf_counter', lambda: next(ticks) * 1e-3
    )
    gflops = matmul_gflops(torch.device('cpu'), size=64, repeats=2)
    assert gflops == pytest.approx(2 * 64**3 / 1e-3 / 1e9)


def test_ceiling_bounds_what_a_same_precision_runtime_can_gain():
    tool = load_tool('.dev_scripts/compare_implementations.py')

    def record(implementation, mode, dtype, gflops):
        return tool.Record(
            arch='t-14',
            implementation=implementation,
            mode=mode,
            dtype=dtype,
            batch_size=4,
            img_size=224,
            device='cpu',
            threads=1,
            images_per_s=1.0,
            gflops=gflops,
        )

    records = [
        record(tool.OURS, 'infer', 'fp32', 80.0),
        record('mmpretrain', 'infer', 'fp32', 40.0),
        record(tool.OURS, 'train', 'fp32', 60.0),
        record(tool.OURS, 'infer', 'bf16', 100.0),
    ]
    [line] = tool.ceiling_bounds(records, {'fp32': 96.0})
    # 96 / 80: eager at 83% of the ceiling leaves at most 1.2x
    assert line == (
        't-14 fp32 inference, batch 4: eager runs at 83% of the fp32 matmul '
        'ceiling, so a runtime computing in fp32 is at most 1.20x faster.'
    )


# a 32 px image, one timed batch per round, two rounds, one thread
QUICK_RUN = (
    '--img-size',
    '32',
    '--iters',
    '1',
    '--rounds',
    '2',
    '--warmup',
    '0',
    '--threads',
    '1',
)


def _run_tool(*args):
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        filter(None, [str(ROOT), env.get('PYTHONPATH')])
    )
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_tool_end_to_end_on_a_tiny_arch(tmp_path):
    arch = json.dumps(dict(TINY, token_layer='transformer'))
    result = _run_tool(
        '--archs',
        arch,
        *QUICK_RUN,
        '--batch-sizes',
        '1',
        '2',
        '--with-cp',
        '--json',
        str(tmp_path / 'b.json'),
        '--csv',
        str(tmp_path / 'b.csv'),
        '--plot',
        str(tmp_path / 'b.png'),
        '--markdown',
        str(tmp_path / 'results.md'),
    )
    assert result.returncode == 0, result.stderr
    assert 'mmpretrain' in result.stdout
    # one bound per batch size of the eager fp32 inference
    assert result.stdout.count('a runtime computing in fp32 is at most') == 2
    report = json.loads((tmp_path / 'b.json').read_text())
    assert report['threads'] == 1
    records = report['records']
    # 2 batch sizes x (inference: ours, mmpretrain; training: + with_cp)
    assert len(records) == 2 * (2 + 3)
    # the tiny backbone's MACs, counted here on their own
    macs = count_complexity(_tiny('transformer'), (32, 32)).macs
    params = sum(p.numel() for p in _tiny('transformer').parameters())
    ours = {
        (r['mode'], r['batch_size']): r
        for r in records
        if r['implementation'] == 't2t-plugin'
    }
    for record in records:
        rounds = record['round_images_per_s']
        assert len(rounds) == 2
        assert record['images_per_s'] == statistics.median(rounds)
        assert record['gmacs_per_image'] == macs / 1e9
        factor = 3 if record['mode'] == 'train' else 1
        assert record['gflops'] == pytest.approx(
            2 * macs * factor * record['images_per_s'] / 1e9
        )
        # at least the weights, in float32
        assert record['peak_memory_mib'] * 2**20 >= 4 * params
        mine = ours[record['mode'], record['batch_size']]
        if record['implementation'] == 't2t-plugin':
            assert record['speedup_of_ours'] is None
        else:
            assert record['speedup_of_ours'] == pytest.approx(
                mine['images_per_s'] / record['images_per_s']
            )
            assert record['memory_ratio_of_ours'] == pytest.approx(
                mine['peak_memory_mib'] / record['peak_memory_mib']
            )
    rows = (tmp_path / 'b.csv').read_text().splitlines()
    assert len(rows) == 1 + len(records)
    # the results page: the command, then one table row per record
    page = (tmp_path / 'results.md').read_text().splitlines()
    assert page[0] == '# Benchmark results'
    assert any(
        line.startswith('python .dev_scripts/compare_implementations.py ')
        and '--markdown' in line
        for line in page
    )
    table = [line for line in page if line.startswith('| ')]
    assert table[0].startswith('| arch | mode | dtype | batch |')
    assert len(table) == 1 + len(records)
    assert sum(line.endswith('| ') for line in page) == 0
    assert (tmp_path / 'b.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize(
    'args,message',
    [
        (['--archs', 'nope'], 'Unknown T2T-ViT arch'),
        (['--official-repo', '/nonexistent'], 'not a checkout'),
    ],
)
def test_tool_user_errors_are_one_line(args, message):
    result = _run_tool(*args, '--img-size', '32', '--iters', '1')
    assert result.returncode == 2
    assert 'Traceback' not in result.stderr
    assert message in result.stderr


def test_tool_times_deployed_copies(tmp_path):
    pytest.importorskip('onnxruntime')
    pytest.importorskip('onnxscript')
    runtimes = ['onnxruntime', 'onnxruntime-int8']
    try:
        import openvino  # noqa: F401

        runtimes += ['openvino', 'openvino-bf16']
    except ImportError:
        pass
    arch = json.dumps(dict(TINY, token_layer='performer'))
    result = _run_tool(
        '--archs',
        arch,
        *QUICK_RUN,
        '--batch-sizes',
        '2',
        '--modes',
        'infer',
        '--references',
        '--runtimes',
        *runtimes,
        '--agreement-images',
        '16',
        '--json',
        str(tmp_path / 'b.json'),
    )
    assert result.returncode == 0, result.stderr
    records = json.loads((tmp_path / 'b.json').read_text())['records']
    assert [r['implementation'] for r in records] == ['t2t-plugin', *runtimes]
    precisions = {
        'onnxruntime': 'fp32',
        'onnxruntime-int8': 'int8',
        'openvino': 'fp32',
        'openvino-bf16': 'bf16',
    }
    for record in records[1:]:
        name = record['implementation']
        assert record['dtype'] == precisions[name]
        assert len(record['round_images_per_s']) == 2
        assert record['speedup_of_ours'] == pytest.approx(
            records[0]['images_per_s'] / record['images_per_s']
        )
        assert record['peak_memory_mib'] is None
        assert 0 <= record['top1_agreement'] <= 1
        if precisions[name] == 'fp32':
            assert record['max_abs_diff'] < 1e-4
            assert record['top1_agreement'] == 1
        else:
            assert record['max_abs_diff'] > 0


def test_tool_refuses_runtimes_off_the_cpu():
    result = _run_tool('--runtimes', 'onnxruntime', '--device', 'cuda')
    assert result.returncode == 2
    assert 'Traceback' not in result.stderr
    assert '--runtimes run on the CPU' in result.stderr

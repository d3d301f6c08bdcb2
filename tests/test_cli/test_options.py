"""The argument checks every tool shares (t2t_plugin/cli/options.py):
one line, exit code 2, before a model is loaded."""

import pytest
import torch

from ..helpers import ROOT, run_main, write_image

DEMO = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'
# positional arguments of each tool; the checkpoint does not exist, so a
# tool that got as far as loading the model would say so instead
TOOLS = {
    'analysis_tools/benchmark': [str(DEMO)],
    'infer': ['{image}', str(DEMO), '{missing}'],
    'visualization/vis_attention': ['{image}', str(DEMO), '{missing}'],
    'visualization/vis_features': ['{image}', str(DEMO), '{missing}'],
}


@pytest.mark.parametrize('tool', sorted(TOOLS))
@pytest.mark.parametrize(
    'option, message',
    [
        (
            ['--device', 'gpu'],
            "--device gpu is not a device; give 'cpu', 'cuda' or 'cuda:N' "
            '(N from 0).',
        ),
        (
            ['--device', 'cuda:0'],
            '--device cuda:0: this machine has no CUDA device '
            '(torch.cuda.is_available() is False); use --device cpu.',
        ),
        (['--max-tokens', '0'], '--max-tokens must be at least 1, got 0'),
    ],
)
def test_tools_refuse_bad_options_in_one_line(
    tmp_path, monkeypatch, tool, option, message
):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    image = write_image(tmp_path / 'a.png', size=(8, 8))
    argv = [
        arg.format(image=image, missing=tmp_path / 'missing.pth')
        for arg in TOOLS[tool]
    ]
    done = run_main(tool, *argv, *option)
    assert done.returncode == 2
    name = tool.rsplit('/', 1)[-1]
    assert done.stderr.strip().splitlines() == [f'{name}.py: error: {message}']


def test_the_exporter_refuses_a_shape_above_the_token_budget(tmp_path):
    pytest.importorskip('onnx')
    out = tmp_path / 'x.onnx'
    done = run_main(
        'deployment/pytorch2onnx', DEMO, tmp_path / 'missing.pth', out,
        '--shape', '200', '200',
    )  # fmt: skip
    assert done.returncode == 2
    # 100 x 100 tokens at the demo's stride 2
    assert done.stderr.strip().splitlines() == [
        'pytorch2onnx.py: error: --shape 200 200 is 10000 tokens at stride '
        '2, above the budget of 4096; give a smaller --shape or raise '
        '--max-tokens.'
    ]
    assert not out.exists()


def test_the_benchmark_refuses_a_side_above_the_token_budget():
    done = run_main('analysis_tools/benchmark', DEMO, '--img-size', '200')
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        'benchmark.py: error: --img-size 200 is 10000 tokens at stride 2, '
        'above the budget of 4096; give a smaller --img-size or raise '
        '--max-tokens.'
    ]

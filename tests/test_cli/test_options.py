"""The argument checks every tool shares (t2t_plugin/cli/options.py):
one line, exit code 2, before a model is loaded."""

import pytest
import torch

from ..helpers import ROOT, run_main, write_image

DEMO = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'
# positional arguments of each tool; the checkpoint is an empty file, so
# a tool that got as far as loading the model would say so instead
TOOLS = {
    'analysis_tools/benchmark': [str(DEMO)],
    'infer': ['{image}', str(DEMO), '{empty}'],
    'visualization/vis_attention': ['{image}', str(DEMO), '{empty}'],
    'visualization/vis_features': ['{image}', str(DEMO), '{empty}'],
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
        # argparse's own refusal (type=): its usage, then the line
        (
            ['--max-tokens', '0'],
            'argument --max-tokens: must be at least 1, got 0',
        ),
    ],
)
def test_tools_refuse_bad_options_in_one_line(
    tmp_path, monkeypatch, tool, option, message
):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    image = write_image(tmp_path / 'a.png', size=(8, 8))
    empty = tmp_path / 'empty.pth'
    empty.touch()
    argv = [arg.format(image=image, empty=empty) for arg in TOOLS[tool]]
    done = run_main(tool, *argv, *option)
    assert done.returncode == 2
    name = tool.rsplit('/', 1)[-1]
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == f'{name}.py: error: {message}'
    usage = lines[:-1]
    assert usage == [] or usage[0].startswith(f'usage: {name}.py'), lines
    assert '--max-tokens' in message or not usage


def test_the_exporter_refuses_a_shape_above_the_token_budget(tmp_path):
    pytest.importorskip('onnx')
    out, empty = tmp_path / 'x.onnx', tmp_path / 'empty.pth'
    empty.touch()
    done = run_main(
        'deployment/pytorch2onnx', DEMO, empty, out,
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


LITE = ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py'


def read_checked(options, checkpoint):
    """A run-only tool's config: read before the model imports, its
    model's keys checked after."""
    from t2t_plugin.cli.options import check_model_keys
    from t2t_preflight.arguments import read_model_config

    return check_model_keys(read_model_config(LITE, options, checkpoint))


def test_the_config_of_a_run_only_tool_takes_the_recipe_variables(
    tmp_path, monkeypatch
):
    """NUM_CLASSES reaches the head and the data preprocessor, as in a
    training; an existing checkpoint passes."""
    checkpoint = tmp_path / 'epoch_2.pth'
    checkpoint.write_bytes(b'')
    monkeypatch.setenv('NUM_CLASSES', '10')
    cfg = read_checked({}, str(checkpoint))
    assert cfg.model.head.num_classes == 10
    assert cfg.data_preprocessor.num_classes == 10


@pytest.mark.parametrize(
    'options, checkpoint, line',
    [
        # the arch is judged before the checkpoint is looked for
        (
            {'model.backbone.arch': 't-15'},
            'missing.pth',
            "model.backbone.arch: Unknown T2T-ViT arch 't-15'; choose one of "
            '7, 10, 12, 14, 19, 24, 14-wide, 14-resnext, t-14, t-19, t-24 '
            '(also as t2t-vit-NAME, any case, NAME@384 at 384 px) or pass a '
            'dict.',
        ),
        (
            {'model.backbone.frozen_stage': 1},
            'empty.pth',
            'model.backbone.frozen_stage: T2TViT takes no argument '
            "'frozen_stage'; did you mean 'frozen_stages'?",
        ),
        # the model's keys need the registered classes: the checkpoint
        # is looked for before they are imported
        (
            {'model.backbone.frozen_stage': 1},
            'missing.pth',
            'Checkpoint not found: expected {tmp}/missing.pth (see '
            'docs/training.md#training).',
        ),
    ],
)
def test_the_config_of_a_run_only_tool_is_checked_in_one_line(
    tmp_path, options, checkpoint, line
):
    from t2t_preflight.errors import ConfigError

    (tmp_path / 'empty.pth').touch()
    with pytest.raises(ConfigError) as raised:
        read_checked(options, str(tmp_path / checkpoint))
    assert str(raised.value) == line.format(tmp=tmp_path)


def test_the_exporter_answers_a_misspelt_model_key_before_writing(tmp_path):
    pytest.importorskip('onnx')
    out, empty = tmp_path / 'new' / 'x.onnx', tmp_path / 'empty.pth'
    empty.touch()
    done = run_main(
        'deployment/pytorch2onnx', LITE, empty, out,
        '--cfg-options', 'model.backbone.frozen_stage=1',
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        'pytorch2onnx.py: error: model.backbone.frozen_stage: T2TViT takes '
        "no argument 'frozen_stage'; did you mean 'frozen_stages'?"
    ]
    assert not out.parent.exists()

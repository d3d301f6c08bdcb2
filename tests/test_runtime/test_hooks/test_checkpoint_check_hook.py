"""CheckpointCheckHook: a checkpoint's classes against the dataset's, a
warning line when fine-tuning on others, a refusal when testing; weights
of parts the model lacks refused when testing or resuming."""

import torch

from t2t_plugin.models.checkpoint_checks import whole_model_error
from t2t_plugin.runtime import CheckpointError
from t2t_plugin.runtime.hooks import class_mismatch

from ...helpers import (
    DEMO,
    DIGIT_CLASSES,
    TINY_DEMO,
    digit_model,
    door,
    one_line,
    run_main,
    save_checkpoint,
)


def assert_test_refuses(checkpoint, expected: str, tmp_path) -> None:
    """Testing the demo with ``checkpoint`` stops with the line
    ``expected``: through our tools/test.py, and through mmengine's own
    Runner with the configs' hooks, as mmpretrain's tools/test.py builds
    it."""
    ours = run_main('test', DEMO, checkpoint, '--work-dir', tmp_path / 'w')
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    error = door(DEMO, dict(load_from=str(checkpoint)), tmp_path / 'd', 'test')
    assert isinstance(error, CheckpointError)
    assert str(error) == expected


def test_class_mismatch_names_counts_and_a_few_names():
    many = tuple(f'n{i:04d}' for i in range(1000))
    message = class_mismatch(
        dict(meta=dict(dataset_meta=dict(classes=many))),
        ['cat', 'emu'],
        'model.pth',
    )
    assert message == (
        'model.pth was trained on 1000 classes (n0000, n0001, n0002, '
        'n0003, n0004 and 995 more), but the dataset has 2 classes (cat, '
        'emu)'
    )
    assert class_mismatch(dict(meta={}), ['a'], 'x.pth') is None
    same = dict(meta=dict(dataset_meta=dict(classes=('a',))))
    assert class_mismatch(same, ['a'], 'x.pth') is None


def test_fine_tuning_on_other_classes_warns_in_one_short_line(tmp_path):
    many = [f'n{i:04d}' for i in range(1000)]
    pretrained = save_checkpoint(tmp_path / 'in1k.pth', many)
    options = [*TINY_DEMO, f'load_from={pretrained}']
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'ours', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    line = next(ln for ln in ours.stdout.splitlines() if 'load_from:' in ln)
    assert line.endswith(
        f'load_from: {pretrained} was trained on 1000 classes (n0000, '
        'n0001, n0002, n0003, n0004 and 995 more), but the dataset has 10 '
        'classes (0, 1, 2, 3, 4 and 5 more); its head is loaded as it is (to '
        'start a new head, load the backbone only, see docs/weights.md).'
    )
    assert len(line) < 400


def test_test_tool_refuses_a_checkpoint_of_other_classes(tmp_path):
    classes = [f'c{i}' for i in range(10)]
    checkpoint = save_checkpoint(tmp_path / 'other.pth', classes)
    expected = (
        f'{checkpoint} was trained on 10 classes (c0, c1, c2, c3, c4 and 5 '
        'more), but the dataset has 10 classes (0, 1, 2, 3, 4 and 5 more); '
        'the labels would not match (check the dataset folders or the '
        'checkpoint).'
    )
    assert_test_refuses(checkpoint, expected, tmp_path)


def test_weights_of_parts_the_model_lacks_are_refused(tmp_path):
    """A neck's weights into a model without a neck: no load hook of the
    backbone or head sees them, and mmengine would only warn."""
    model = digit_model()
    weights = dict(model.state_dict())
    weights['neck.fc.weight'] = torch.zeros(2, 2)
    weights['neck.fc.bias'] = torch.zeros(2)
    checkpoint = tmp_path / 'with_neck.pth'
    torch.save(
        dict(
            state_dict=weights,
            meta=dict(dataset_meta=dict(classes=tuple(DIGIT_CLASSES))),
        ),
        checkpoint,
    )
    expected = (
        f'The checkpoint {checkpoint} holds weights of neck, which this '
        "ImageClassifier does not have: it is another model's checkpoint; "
        'use the config it was trained with.'
    )
    assert str(whole_model_error(model, weights)) == expected.replace(
        f' {checkpoint}', ''
    )
    assert whole_model_error(model, model.state_dict()) is None
    assert_test_refuses(checkpoint, expected, tmp_path)


def test_a_test_refuses_a_classifier_of_another_count(tmp_path):
    """What a fine-tune's load_from leaves out, a test needs: mmengine's
    Runner, as mmpretrain's tools/test.py builds it, stops before the
    weights load (our tools/test.py: tests/test_tools)."""
    checkpoint = tmp_path / 'three.pth'
    model = digit_model()
    model.head.num_classes = 3
    weights = dict(model.state_dict())
    weights['head.layers.head.weight'] = torch.zeros(3, 64)
    weights['head.layers.head.bias'] = torch.zeros(3)
    torch.save(dict(state_dict=weights), checkpoint)
    error = door(DEMO, dict(load_from=str(checkpoint)), tmp_path / 'd', 'test')
    assert isinstance(error, CheckpointError) and error.classes == 3
    assert str(error) == (
        f"The checkpoint {checkpoint} classifies 3 classes, this model's "
        'head 10 (num_classes); use the config it was trained with (its '
        'model.head.num_classes).'
    )

"""output_problem: the one rule for what a run or tool may write (not an
input, no link loop, no file on the way, a writable folder, no other file
replaced unless asked), through its doors: the work dir of our
tools/train.py and of the configs' runner, the --out of our tools/test.py
and of mmpretrain's tools/test.py (RunCheckHook)."""

import os
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import RUNNERS

from t2t_plugin.apis import check_writable
from t2t_preflight.errors import ConfigError
from t2t_preflight.outputs import output_problem

from ..helpers import (
    DEMO,
    DIGIT_CLASSES,
    last_line,
    one_line,
    run_main,
    run_mmpretrain_tool,
    save_checkpoint,
)


def test_output_problem_names_each_case(tmp_path):
    model = tmp_path / 'model.pth'
    model.write_bytes(b'weights')
    link = tmp_path / 'link.pth'
    link.symlink_to(model)
    inputs = {'the checkpoint': str(model)}
    assert output_problem(str(link), 'OUT', True, inputs) == (
        f'OUT {link} is the checkpoint, an input of this command; give '
        'another path.'
    )
    assert output_problem(
        str(tmp_path / 'vis'),
        '--out-dir',
        False,
        {'the image folder': str(tmp_path)},
    ) == (
        f'--out-dir {tmp_path / "vis"} lies in the image folder {tmp_path}, '
        'an input of this command; give a path outside it.'
    )
    # beside a single image: its drawings never take its name
    assert (
        output_problem(
            str(tmp_path), '--out-dir', False, {'the image': str(model)}
        )
        is None
    )
    loop = tmp_path / 'loop'
    loop.symlink_to(loop)
    assert output_problem(str(loop / 'run'), '--work-dir') == (
        f'--work-dir {loop / "run"}: {loop} is a symbolic link loop (a link '
        'to a folder above it); remove or replace the link.'
    )
    assert output_problem(str(model / 'run'), '--work-dir') == (
        f'--work-dir {model / "run"}: {model} is a file, not a folder.'
    )
    assert output_problem(str(model), '--show-dir') == (
        f'--show-dir {model}: {model} is a file, not a folder.'
    )
    assert output_problem(str(tmp_path), '--out', True) == (
        f'--out {tmp_path} is a folder; give a file name.'
    )
    kind = ('an ONNX model', lambda path: Path(path).suffix == '.onnx')
    assert output_problem(str(model), 'OUT', True, replaces=kind) == (
        f'OUT {model} exists and is not an ONNX model; give a new name, or '
        '--force to replace it.'
    )
    earlier = tmp_path / 'earlier.onnx'
    earlier.write_bytes(b'graph')
    assert output_problem(str(earlier), 'OUT', True, replaces=kind) is None
    assert (
        output_problem(str(tmp_path / 'new' / 'a' / 'b'), '--out-dir') is None
    )
    # the library's checks raise the same line, and make the folder
    with pytest.raises(ValueError, match='symbolic link loop'):
        check_writable(loop / 'run', '--out-dir')
    with pytest.raises(ValueError, match='is the checkpoint'):
        check_writable(link, 'OUT', file=True, inputs=inputs)
    check_writable(tmp_path / 'made' / 'x.onnx', 'OUT', file=True)
    assert (tmp_path / 'made').is_dir()


@pytest.mark.skipif(
    os.geteuid() == 0, reason='root writes into read-only folders'
)
def test_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / 'read-only'
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert output_problem(str(folder / 'run'), '--work-dir') == (
            f'--work-dir {folder / "run"}: {folder} is not writable; choose '
            'a folder you can write to.'
        )
    finally:
        folder.chmod(0o755)


def test_a_work_dir_through_a_link_loop_is_one_line(tmp_path):
    loop = tmp_path / 'loop'
    loop.symlink_to(loop)
    work_dir = loop / 'run'
    expected = (
        f'--work-dir {work_dir}: {loop} is a symbolic link loop (a link to '
        'a folder above it); remove or replace the link.'
    )
    ours = run_main('train', DEMO, '--work-dir', work_dir)
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    # the configs' runner, as every OpenMMLab tool builds it
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(work_dir)
    with pytest.raises(ConfigError) as info:
        RUNNERS.build(cfg)
    assert str(info.value) == expected


def test_test_out_never_replaces_the_checkpoint(tmp_path):
    """A checkpoint saved as x.pkl and --out x.pkl: refused in one line by
    our tools/test.py and by RunCheckHook under mmpretrain's --out; the
    checkpoint is left as it was."""
    checkpoint = save_checkpoint(tmp_path / 'x.pth', DIGIT_CLASSES)
    pickled = checkpoint.rename(tmp_path / 'x.pkl')
    before = pickled.read_bytes()
    expected = (
        f'--out {pickled} is the checkpoint, an input of this command; give '
        'another path.'
    )
    ours = run_main(
        'test', DEMO, pickled, '--work-dir', tmp_path / 'w', '--out', pickled
    )
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    theirs = run_mmpretrain_tool(
        'test',
        DEMO,
        pickled,
        '--work-dir',
        tmp_path / 'd',
        '--out',
        pickled,
    )
    assert theirs.returncode == 1
    assert last_line(theirs.stderr).endswith(f'RunCheckError: {expected}')
    assert pickled.read_bytes() == before
    assert torch.load(pickled, weights_only=False)['state_dict']


def test_every_door_asks_output_problem(monkeypatch, tmp_path):
    """The rule patched: the configs' runner (the work dir), RunCheckHook
    (--out of mmpretrain's test.py) and the export tool answer with it."""
    from t2t_plugin.apis import input_checks
    from t2t_plugin.runtime.hooks import run_check_hook
    from t2t_preflight import checks

    from ..helpers import load_tool

    asked = []

    def owner(path, what, *args, **kwargs):
        asked.append(what)
        return f'{what}: refused by the owner'

    for module in (checks, input_checks, run_check_hook):
        monkeypatch.setattr(module, 'output_problem', owner)
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(tmp_path / 'w')
    with pytest.raises(ConfigError, match='--work-dir: refused by the owner'):
        RUNNERS.build(cfg)
    export = load_tool('tools/deployment/pytorch2onnx.py')
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    assert export.main([DEMO, str(checkpoint), str(tmp_path / 'm.onnx')]) == 2
    assert asked == ['--work-dir', 'The output']

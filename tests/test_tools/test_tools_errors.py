"""User mistakes given to the tools end in one line and a non-zero exit;
what the tools write and delete stays within the user's intent (demo work
dirs, checkpoint permissions, stale temporary files, resume and Slurm
arguments)."""

import argparse
import copy
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

from t2t_plugin.runtime import (
    AtomicLocalBackend,
    CheckpointError,
    SampleSeededRunner,
    read_checkpoint,
    remove_stale_temp_files,
)

from ..helpers import (
    DEMO,
    ROOT,
    evaluate_in_process,
    load_tool,
    run_main,
    tool_env,
)

ONE_EPOCH = [
    '--cfg-options',
    'train_cfg.max_epochs=1',
    'train_cfg.val_interval=1',
    'default_hooks.checkpoint.interval=1',
]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_demo_model(path: Path, num_classes: int = 10) -> Path:
    """A state-dict checkpoint of the demo model, with ``num_classes``."""
    cfg = Config.fromfile(DEMO)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.head.num_classes = num_classes
    torch.save({'state_dict': MODELS.build(model_cfg).state_dict()}, path)
    return path


def main_result(tool: str, *args) -> tuple:
    result = run_main(tool, *args)
    return result.returncode, result.stderr


def assert_one_line(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, result.stderr[-3000:]
    assert 'Traceback' not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


# 1. The demo only empties folders that are its own.


@pytest.mark.parametrize('folder', ['.', '..', '~', 'user_files'])
def test_demo_refuses_folders_that_are_not_demo_work_dirs(folder, tmp_path):
    if folder == 'user_files':
        folder = str(tmp_path)
        (tmp_path / 'thesis.tex').write_text('keep me')
    elif folder == '~':
        folder = os.path.expanduser('~')
    result = subprocess.run(
        [sys.executable, 'tools/demo.py', '--work-dir', folder],
        cwd=ROOT,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert assert_one_line(result, 1) == (
        f'Demo stopped: {folder} exists and is not a demo work dir; pass an '
        'empty or new folder.'
    )
    assert result.stdout == ''  # nothing ran
    assert (ROOT / 'tools' / 'demo.py').is_file()
    if folder == str(tmp_path):
        assert (tmp_path / 'thesis.tex').read_text() == 'keep me'


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    work_dir = tmp_path / 'demo'
    result = subprocess.run(
        [
            sys.executable,
            'tools/demo.py',
            '--work-dir',
            str(work_dir),
            '--epochs',
            '1',
        ],
        cwd=ROOT,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    head, summary = result.stdout.split('\nT2T-ViT digits demo')
    # quiet: the two commands, the log file's path, the training's
    # progress lines, mmengine's warnings and the run's summary; the
    # environment and config in the log only
    progress, run_summary = head.split(' - INFO - Training done: ')
    # the line the summary starts on keeps its time and logger name
    for line in progress.strip().splitlines()[:-1]:
        assert (
            line.startswith('$ ')
            or ' - INFO - Epoch(' in line
            or ' - INFO - Full log (environment, config): ' in line
            or ' - WARNING - ' in line
        ), line
    assert 'Next, with the config this run saved:' in run_summary
    assert result.stderr == ''
    paths = {}
    for line in ('train log:', 'checkpoint:', 'curves:'):
        paths[line] = summary.split(line)[1].split('\n')[0].strip()
        assert (ROOT / paths[line]).is_file(), line
    log = (ROOT / paths['train log:']).read_text()
    assert 'System environment' in log and 'Config:' in log
    # the printed top-1 is that of the checkpoint it names
    top1 = float(summary.split('val top-1:')[1].split('%')[0])
    expected, _ = evaluate_in_process(str(ROOT / paths['checkpoint:']))
    assert top1 == pytest.approx(expected, abs=0.01)


def test_demo_clears_new_empty_and_earlier_demo_folders(tmp_path):
    demo = load_tool('tools/demo.py')
    assert demo.can_clear(str(tmp_path / 'new'))
    assert demo.can_clear(str(tmp_path))  # empty
    (tmp_path / 'last_checkpoint').write_text('epoch_40.pth')
    assert demo.can_clear(str(tmp_path))
    dumped = tmp_path / 'dumped'
    dumped.mkdir()
    (dumped / 't2t-vit-mini_1xb64_digits.py').write_text('')
    assert demo.can_clear(str(dumped))
    (tmp_path / 'file').write_text('')
    assert not demo.can_clear(str(tmp_path / 'file'))
    # Protected whatever they contain.
    assert not demo.can_clear(str(ROOT))
    assert not demo.can_clear(str(ROOT / '..'))
    assert not demo.can_clear('/')


# 2. --resume in a fresh work dir keeps load_from.


def resume_args(work_dir: Path, resume: str = 'auto') -> argparse.Namespace:
    return argparse.Namespace(
        config=DEMO,
        cfg_options=None,
        work_dir=str(work_dir),
        amp=False,
        resume=resume,
        auto_scale_lr=False,
        no_validate=False,
        no_pin_memory=False,
        no_persistent_workers=False,
        launcher='none',
    )


def test_resume_auto_picks_the_latest_checkpoint(tmp_path):
    train_tool = load_tool('tools/train.py')
    # --resume takes only a checkpoint that reads completely
    torch.save({'state_dict': {}}, tmp_path / 'epoch_2.pth')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_2.pth'))
    cfg = Config.fromfile(DEMO)
    cfg.load_from = 'pretrained.pth'
    cfg = train_tool.merge_args(cfg, resume_args(tmp_path))
    # the tool passes the choice on to the Runner, which every tool builds
    assert (cfg.resume, cfg.load_from) == ('auto', 'pretrained.pth')
    runner = SampleSeededRunner.from_cfg(cfg)
    assert runner.load_from == str(tmp_path / 'epoch_2.pth')
    assert runner.resumes

    cfg = train_tool.merge_args(
        Config.fromfile(DEMO), resume_args(tmp_path, 'given.pth')
    )
    assert (cfg.resume, cfg.load_from) == (True, 'given.pth')


def test_resume_in_a_fresh_work_dir_starts_from_load_from(tmp_path):
    """A 1-epoch run with --resume in a work dir that has no checkpoint:
    it loads load_from, removes our stale temporary files only, and writes
    checkpoints that others can read."""
    pretrained = save_demo_model(tmp_path / 'pretrained.pth')
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    stale = work_dir / '.epoch_1.pth.k2x_9abq.tmp'
    stale.write_bytes(b'half a checkpoint')
    kept = [work_dir / '.notes.tmp', work_dir / 'draft.tmp']
    for path in kept:
        path.write_text('mine')
    result = run_main(
        'train',
        DEMO,
        '--work-dir',
        work_dir,
        '--verbose',  # the run's start and end, logged as INFO
        '--resume',
        *ONE_EPOCH,
        'train_dataloader.dataset.indices=32',
        'val_dataloader.dataset.indices=16',
        f'load_from={pretrained}',
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        f'No checkpoint in {work_dir} to resume; starting from '
        f'load_from={pretrained}.'
    ) in result.stdout
    assert f'Load checkpoint from {pretrained}' in result.stdout
    assert 'Removed 1 temporary checkpoint file(s)' in result.stdout
    assert not stale.exists() and all(p.read_text() == 'mine' for p in kept)
    checkpoint = work_dir / 'epoch_1.pth'
    assert stat.S_IMODE(checkpoint.stat().st_mode) == 0o666 & ~current_umask()


def test_resume_without_checkpoint_checks_load_from(tmp_path):
    missing = tmp_path / 'missing.pth'
    result = run_main(
        'train',
        DEMO,
        '--work-dir',
        tmp_path,
        '--verbose',  # the resume's choice, logged as INFO
        '--resume',
        '--cfg-options',
        f'load_from={missing}',
    )
    assert assert_one_line(result, 1) == (
        f'Checkpoint not found: expected {missing} '
        '(see docs/training.md#training).'
    )
    assert (
        f'No checkpoint in {tmp_path} to resume; starting from '
        f'load_from={missing}.'
    ) in result.stdout


# 3. and 10. Checkpoint files: permissions and stale temporary files.


def test_atomic_backend_writes_readable_files(tmp_path):
    backend = AtomicLocalBackend()
    target = tmp_path / 'epoch_1.pth'
    backend.put(b'one', target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~current_umask()
    # An existing file keeps the mode its owner gave it.
    target.chmod(0o640)
    backend.put(b'two', target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.read_bytes() == b'two'


def test_remove_stale_temp_files_only_removes_our_pattern(tmp_path):
    ours = [
        tmp_path / '.epoch_3.pth.a1b2c3d4.tmp',
        tmp_path / '.last_checkpoint.zz_9yy8x.tmp',
    ]
    others = [
        tmp_path / 'epoch_3.pth',
        tmp_path / '.epoch_3.pth.tmp',
        tmp_path / 'results.a1b2c3d4.tmp',
        tmp_path / '.x.ABCDEFGH.tmp',
    ]
    for path in ours + others:
        path.write_bytes(b'')
    (tmp_path / '.dir.a1b2c3d4.tmp').mkdir()
    assert remove_stale_temp_files(str(tmp_path)) == sorted(map(str, ours))
    assert all(path.exists() for path in others)
    assert (tmp_path / '.dir.a1b2c3d4.tmp').is_dir()
    assert remove_stale_temp_files(str(tmp_path / 'none')) == []


# 4. Broken checkpoints.


def broken_checkpoints(folder: Path) -> dict:
    good = save_demo_model(folder / 'good.pth')
    data = good.read_bytes()
    files = {
        'truncated': data[: len(data) // 2],
        'garbage': os.urandom(4096),
        'empty': b'',
    }
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f'{name}.pth'
        paths[name].write_bytes(content)
    return paths


def _read_error(path) -> str:
    with pytest.raises(CheckpointError) as error:
        read_checkpoint(str(path))
    return str(error.value)


def test_checkpoint_read_error(tmp_path):
    paths = broken_checkpoints(tmp_path)
    read_checkpoint(str(tmp_path / 'good.pth'))
    for path in paths.values():
        message = _read_error(path)
        assert message.startswith(
            f'Cannot read checkpoint {path}: not a complete PyTorch '
            'checkpoint ('
        )
        assert '\n' not in message and 'weights_only' not in message
    assert (
        'RuntimeError: PytorchStreamReader failed reading zip archive'
        in _read_error(paths['truncated'])
    )


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_truncated_checkpoint_is_one_line(tool, tmp_path):
    path = broken_checkpoints(tmp_path)['truncated']
    args = ['--resume', str(path)] if tool == 'train' else [str(path)]
    result = run_main(tool, DEMO, *args, '--work-dir', tmp_path / 'work')
    line = assert_one_line(result, 1)
    assert line.startswith(
        f'Cannot read checkpoint {path}: not a complete '
        'PyTorch checkpoint (RuntimeError: '
    )
    assert not list((tmp_path / 'work').glob('*.pth'))


# 5. A checkpoint of another model.


def test_test_tool_refuses_a_checkpoint_of_another_model(tmp_path):
    other = save_demo_model(tmp_path / 'cifar100_head.pth', num_classes=100)
    result = run_main('test', DEMO, other, '--work-dir', tmp_path / 'work')
    line = assert_one_line(result, 1)
    # a tool that only runs the model names the config that fits, not
    # how to fine-tune (the digits config has no num_classes variable)
    assert line == (
        f"The checkpoint {other} classifies 100 classes, this model's "
        'head 10 (num_classes); give the tool the config its run saved in '
        'the work dir or add --cfg-options model.head.num_classes=100.'
    )
    assert 'accuracy' not in result.stdout


# 6. Mistakes found while building the run.


def config_without_model(folder: Path) -> str:
    path = folder / 'no_model.py'
    path.write_text(
        "custom_imports = dict(imports=['t2t_plugin'])\n"
        "default_scope = 'mmpretrain'\n"
        'train_cfg = dict(max_epochs=1)\n'
    )
    return str(path)


# A misspelt key or an unknown arch: tests/test_preflight/test_checks.py.
@pytest.mark.parametrize('case', ['attn_init', 'no_model', 'imagenet'])
def test_build_errors_are_one_line(case, tmp_path, monkeypatch):
    config, options = DEMO, []
    if case == 'attn_init':
        options = ['--cfg-options', 'model.backbone.attn_init.type=foo']
        expected = "ValueError: Unknown attn_init {'type': 'foo'}; give None"
    elif case == 'no_model':
        config = config_without_model(tmp_path)
        expected = "KeyError: 'model'"
    else:
        config = str(ROOT / 'configs' / 't2t-vit-7_8xb64_in1k.py')
        for folder in ('train', 'val', 'meta'):
            (tmp_path / 'data' / 'imagenet' / folder).mkdir(parents=True)
        # ImageNet's class folders counted before the Runner (mmpretrain's
        # assertion would say: The number of subfolders (0) ...)
        expected = (
            'train_dataloader: the dataset has 0 class in '
            'data/imagenet/train; a classifier needs at least two, one '
            'folder of images each.'
        )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('T2T_DEBUG', raising=False)
    code, err = main_result(
        'train',
        config,
        '--work-dir',
        str(tmp_path / 'work'),
        *options,
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    if case == 'imagenet':
        assert err == expected + '\n'
        return
    assert err.startswith(f'{config}: {expected}')
    assert err.strip().endswith(' (set T2T_DEBUG=1 for the traceback)')


def test_test_tool_build_errors_are_one_line(tmp_path, monkeypatch):
    checkpoint = save_demo_model(tmp_path / 'model.pth')
    code, err = main_result(
        'test',
        DEMO,
        str(checkpoint),
        '--work-dir',
        str(tmp_path / 'work'),
        '--cfg-options',
        'test_dataloader.dataset.split=tset',
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f'{DEMO}: ')
    assert 'tset' in err
    assert err.strip().endswith(' (set T2T_DEBUG=1 for the traceback)')


def test_t2t_debug_keeps_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv('T2T_DEBUG', '1')
    result = run_main(
        'train', config_without_model(tmp_path),
        '--work-dir', tmp_path / 'work',
    )  # fmt: skip
    assert result.returncode == 1
    assert 'Traceback' in result.stderr
    assert result.stderr.strip().endswith("KeyError: 'model'")


# 7. A distributed launcher without torchrun.


@pytest.mark.parametrize(
    'tool, launcher, names, start',
    [
        (
            'train',
            'pytorch',
            'MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE',
            'torchrun, e.g. tools/dist_train.sh',
        ),
        (
            'test',
            'pytorch',
            'MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE',
            'torchrun, e.g. tools/dist_train.sh',
        ),
        (
            'train',
            'slurm',
            'SLURM_NODELIST, SLURM_NTASKS, SLURM_PROCID',
            'srun, e.g. tools/slurm_train.sh',
        ),
    ],
)
def test_launcher_without_its_starter_is_one_line(
    tool, launcher, names, start, tmp_path, monkeypatch
):
    if torch.cuda.is_available():
        pytest.skip('mmengine opens the process group itself with CUDA')
    for name in (
        'MASTER_ADDR',
        'MASTER_PORT',
        'RANK',
        'WORLD_SIZE',
        'SLURM_NODELIST',
        'SLURM_NTASKS',
        'SLURM_PROCID',
    ):
        monkeypatch.delenv(name, raising=False)
    checkpoint = (
        []
        if tool == 'train'
        else [str(save_demo_model(tmp_path / 'model.pth'))]
    )
    code, err = main_result(
        tool,
        DEMO,
        *checkpoint,
        '--launcher',
        launcher,
        '--work-dir',
        str(tmp_path / 'work'),
    )
    assert code == 2
    assert err == (
        f"launcher='{launcher}' needs the environment variables "
        f'{names}; start the script with {start}.\n'
    )


# 8. --out formats.


def test_out_format_is_checked_before_evaluation(tmp_path, monkeypatch):
    checkpoint = tmp_path / 'model.pth'
    checkpoint.write_bytes(b'')  # never read: the option fails first
    code, err = main_result(
        'test',
        DEMO,
        str(checkpoint),
        '--out',
        'm.txt',
        '--out-item',
        'metrics',
        '--work-dir',
        str(tmp_path / 'work'),
    )
    assert code == 2
    assert err == (
        f'Invalid options for {DEMO}: --out-item metrics saves with '
        "mmengine's dump, which writes json, yaml, yml, pickle, pkl files; "
        'got --out m.txt.\n'
    )
    # predictions, as mmpretrain's test.py writes them, go to a .pkl
    code, err = main_result(
        'test',
        DEMO,
        str(checkpoint),
        '--out',
        'm.json',
        '--work-dir',
        str(tmp_path / 'work'),
    )
    assert code == 2
    assert err == (
        f'Invalid options for {DEMO}: --out m.json: The output file must be '
        "a pkl file (mmengine's DumpResults takes .pkl or .pickle; "
        '--out-item metrics saves the metrics as .json or .yaml too).\n'
    )


# 9. slurm_train.sh without WORK_DIR but with options.


@pytest.mark.skipif(sys.platform == 'win32', reason='bash launcher')
@pytest.mark.parametrize(
    'args, work_dir, options',
    [
        (
            ['--amp', '--resume'],
            'work_dirs/t2t-vit-mini_1xb64_digits',
            ['--amp', '--resume'],
        ),
        (['my_dir', '--amp'], 'my_dir', ['--amp']),
        ([], 'work_dirs/t2t-vit-mini_1xb64_digits', []),
    ],
)
def test_slurm_train_tells_options_from_the_work_dir(
    args, work_dir, options, tmp_path
):
    # A stand-in srun that prints the command it was given, one per line.
    srun = tmp_path / 'srun'
    srun.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    srun.chmod(0o755)
    env = dict(
        tool_env(),
        PATH=f'{tmp_path}{os.pathsep}{os.environ["PATH"]}',
        PYTHON='python',
    )
    result = subprocess.run(
        [
            'bash',
            'tools/slurm_train.sh',
            'dev',
            'job',
            'configs/t2t-vit-mini_1xb64_digits.py',
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()
    tail = command[command.index('-u') :]
    assert tail == [
        '-u',
        str(ROOT / 'tools' / 'train.py'),
        'configs/t2t-vit-mini_1xb64_digits.py',
        f'--work-dir={work_dir}',
        '--launcher=slurm',
        *options,
    ]

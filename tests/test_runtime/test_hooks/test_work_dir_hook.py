"""WorkDirHook: output paths that cannot be written are refused before the
work, one training at a time in a work dir, and a checkpoint that would
not fit on the disk stops the run before it is saved."""

import json
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from mmengine.config import Config
from mmengine.evaluator import DumpResults
from mmengine.registry import RUNNERS

from t2t_plugin.runtime.hooks import (
    DiskFullError,
    RunCheckError,
    work_dir_hook,
)
from t2t_preflight.errors import ConfigError

from ...helpers import (
    DEMO,
    DIGIT_CLASSES,
    TINY_DEMO,
    as_dict,
    digit_model,
    door,
    one_line,
    plain_runner,
    run_main,
    save_checkpoint,
)


@pytest.mark.parametrize('option', ['--out', '--show-dir', '--work-dir'])
def test_output_paths_are_checked_before_the_work(option, tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    target = blocker / 'out.pkl'
    args = [DEMO, checkpoint, '--work-dir', tmp_path / 'w']
    args += [option, target] if option != '--work-dir' else []
    if option == '--work-dir':
        args[3] = target
    ours = run_main('test', *args)
    assert ours.returncode == 1
    assert one_line(ours.stderr) == (
        f'{option} {target}: {blocker} is a file, not a folder.'
    )
    assert 'accuracy' not in ours.stdout
    if option == '--out':  # the metrics file, which the tool writes itself
        metrics = run_main('test', *args, '--out-item', 'metrics')
        assert metrics.returncode == 1
        assert one_line(metrics.stderr) == one_line(ours.stderr)
        assert 'accuracy' not in metrics.stdout
    if option == '--work-dir':
        # the configs' runner checks it before it makes the folder, for
        # every tool that builds it (mmengine's own Runner: its OSError)
        cfg = Config.fromfile(DEMO)
        cfg.merge_from_dict(dict(work_dir=str(target)))
        with pytest.raises(ConfigError) as info:
            RUNNERS.build(cfg)
        assert str(info.value) == one_line(ours.stderr)
        assert not target.exists()
        return
    # what mmpretrain's test.py makes of --out and --show-dir
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'd'), load_from=str(checkpoint))
    )
    if option == '--show-dir':
        cfg.default_hooks.visualization.update(
            enable=True, out_dir=str(target)
        )
    runner = plain_runner(cfg)
    if option == '--out':
        runner.test_evaluator.metrics.append(DumpResults(str(target)))
    with pytest.raises(RunCheckError) as info:
        runner.test()
    assert str(info.value) == one_line(ours.stderr)


def live_process():
    return subprocess.Popen(
        [sys.executable, '-c', 'import time; time.sleep(60)']
    )


def test_a_second_training_into_a_work_dir_is_refused(tmp_path):
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    lock = work_dir / 'train.lock'
    first = live_process()
    host = socket.gethostname()
    try:
        lock.write_text(json.dumps(dict(pid=first.pid, host=host)))
        expected = (
            f'{work_dir} is in use by another training (process {first.pid} '
            f'on {host}, see {lock}); choose another --work-dir, or delete '
            'the file if that run has ended.'
        )
        ours = run_main('train', DEMO, '--work-dir', work_dir)
        assert ours.returncode == 1 and one_line(ours.stderr) == expected
        error = door(DEMO, {}, work_dir)
        assert isinstance(error, RunCheckError) and str(error) == expected
        assert not list(work_dir.glob('*.pth'))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the first run is gone: its lock is taken over, and released at the end
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO
    )
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (work_dir / 'epoch_1.pth').is_file() and not lock.exists()


def test_too_little_space_for_a_checkpoint_stops_before_saving(
    tmp_path, monkeypatch
):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        work_dir_hook.shutil,
        'disk_usage',
        lambda path: usage._replace(free=2**20),
    )
    needed = sum(v.numel() * 4 for v in digit_model().state_dict().values())
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options',
        *TINY_DEMO,
    )  # fmt: skip
    assert ours.returncode == 1
    line = one_line(ours.stderr)
    assert line.startswith(
        'Training stopped before saving a checkpoint: it needs about '
    )
    # weights, their optimizer moments and gradients' companions
    assert float(line.split('about ')[1].split(' MiB')[0]) > needed / 2**20
    assert f'{tmp_path}/w has 1.0 MiB free' in line
    assert not (tmp_path / 'w' / 'epoch_1.pth').exists()
    error = door(DEMO, as_dict(TINY_DEMO), tmp_path / 'door')
    assert isinstance(error, DiskFullError)

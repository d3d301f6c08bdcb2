import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace

from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.runner import Runner

from t2t_plugin.runtime.hooks import RunSummaryHook

from ...helpers import (
    DEMO,
    TINY_DEMO,
    as_dict,
    forget_visualizers_and_loggers,
    plain_runner,
    run_main,
    run_mmpretrain_tool,
)

# Two epochs of the tiny demo, evaluated after each.
TWO_EPOCHS = [*TINY_DEMO, 'train_cfg.max_epochs=2']


def evaluations(work_dir: Path) -> list[float]:
    """The top-1 of each evaluation, from the scalars the visualizer
    wrote (not from the hook)."""
    (scalars,) = work_dir.glob('*/vis_data/scalars.json')
    records = [json.loads(line) for line in scalars.read_text().splitlines()]
    return [r['accuracy/top1'] for r in records if 'accuracy/top1' in r]


def summary_of(text: str) -> list[str]:
    """The summary's lines in a run's output."""
    start = text.index('Training done: ')
    return text[start:].splitlines()


def check_summary(lines: list[str], work_dir: Path) -> dict[str, str]:
    """The summary's facts against the work dir; its paths by name."""
    top1 = evaluations(work_dir)
    assert len(top1) == 2
    best = max(range(2), key=lambda index: (top1[index], -index))
    assert lines[0] == f'Training done: 2 epochs, in {work_dir}'
    assert lines[1] == (
        f'  best accuracy/top1: {top1[best]:.4f} at epoch {best + 1}; '
        f'last: {top1[1]:.4f} at epoch 2'
    )
    paths = {}
    for line in lines[2:5]:
        name, path = line.split()
        paths[name.rstrip(':')] = path
    assert list(paths) == ['checkpoint', 'curves', 'config']
    assert paths['checkpoint'] == str(
        work_dir / f'best_accuracy_top1_epoch_{best + 1}.pth'
    )
    assert paths['curves'] == str(work_dir / 'curves.png')
    assert paths['config'] == str(work_dir / Path(DEMO).name)
    for path in paths.values():
        assert Path(path).is_file(), path
    # the saved config holds the run's options
    saved = Config.fromfile(paths['config'])
    assert saved.train_cfg.max_epochs == 2
    assert lines[5] == 'Next, with the config this run saved:'
    run = f'{paths["config"]} {paths["checkpoint"]}'
    commands = [shlex.split(line) for line in lines[6:9]]
    assert [words[1].split('tools/')[-1] for words in commands] == [
        'test.py',
        'infer.py',
        'deployment/pytorch2onnx.py',
    ]
    assert ' '.join(commands[0][2:]) == run
    assert ' '.join(commands[2][2:4]) == run
    return paths


def test_summary_ends_a_training_of_the_train_tool(tmp_path):
    work_dir = tmp_path / 'work'
    result = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TWO_EPOCHS
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = summary_of(result.stdout)
    check_summary(lines, work_dir)
    # the terminal: the log file's path, progress, evaluations, summary
    assert 'System environment' not in result.stdout
    log = next(work_dir.glob('*/*.log'))
    assert f'Full log (environment, config): {log}' in result.stdout
    assert 'System environment' in log.read_text()
    # mmengine's notices about itself (its CheckpointHook's FileClient)
    # stay in the log file
    notice = '"FileClient" will be deprecated'
    assert notice not in result.stdout + result.stderr
    assert notice in log.read_text()
    # the printed test command runs as it is and scores the checkpoint
    tested = run_main(*shlex.split(lines[6])[1:], '--work-dir', tmp_path)
    assert tested.returncode == 0, tested.stderr[-3000:]
    # mmengine names the loader (ours) as it loads the checkpoint
    checkpoint = shlex.split(lines[6])[3]
    assert (
        f'Loads checkpoint by t2t_plugin backend from path: {checkpoint}'
        in tested.stdout.splitlines()
    )
    assert any(
        line.startswith('accuracy/top1: ')
        for line in tested.stdout.splitlines()
    )


def test_summary_ends_a_training_of_mmpretrains_train_tool(tmp_path):
    result = run_mmpretrain_tool(
        'train', DEMO, '--work-dir', tmp_path, '--cfg-options', *TWO_EPOCHS
    )
    assert result.returncode == 0, result.stderr[-3000:]
    check_summary(summary_of(result.stdout), tmp_path)
    # mmpretrain's tool prints as it always did
    assert 'System environment' in result.stdout


def test_resumed_run_sums_up_the_whole_training(tmp_path):
    """mmengine's Runner from the config: one epoch, then a resume to
    the second; the summary has both evaluations."""

    def run(epochs: int, resume: bool) -> Runner:
        forget_visualizers_and_loggers()
        cfg = Config.fromfile(DEMO)
        cfg.merge_from_dict(as_dict(TINY_DEMO))
        cfg.train_cfg.max_epochs = epochs
        cfg.work_dir, cfg.resume = str(tmp_path), resume
        runner = plain_runner(cfg)
        runner.train()
        return runner

    run(1, False)
    runner = run(2, True)
    (hook,) = [h for h in runner.hooks if isinstance(h, RunSummaryHook)]
    found = hook.evaluations(runner)
    assert [entry[:2] for entry in found] == [
        (1, 'accuracy/top1'),
        (2, 'accuracy/top1'),
    ]
    assert [entry[2] for entry in found] == evaluations_of_both(tmp_path)
    assert os.path.isfile(hook.checkpoint_to_use(runner))


def test_checkpoint_to_use_is_the_best_else_the_last_of_the_run(tmp_path):
    """What CheckpointHook recorded in the message hub: the best
    checkpoint, else the last; not a last_checkpoint left by an earlier
    run in the work dir, nor a file that is gone."""
    hub = MessageHub.get_instance('test_checkpoint_to_use')
    runner = SimpleNamespace(message_hub=hub, work_dir=str(tmp_path))
    earlier, last, best = (tmp_path / f'{n}.pth' for n in 'elb')
    for path in (earlier, last, best):
        path.write_bytes(b'saved')
    (tmp_path / 'last_checkpoint').write_text(str(earlier))
    assert RunSummaryHook.checkpoint_to_use(runner) is None
    hub.update_info('best_ckpt', str(tmp_path / 'removed.pth'))
    hub.update_info('last_ckpt', str(last))
    assert RunSummaryHook.checkpoint_to_use(runner) == str(last)
    hub.update_info('best_ckpt', str(best))
    assert RunSummaryHook.checkpoint_to_use(runner) == str(best)


def evaluations_of_both(work_dir: Path) -> list[float]:
    """The top-1 of each start's evaluations, oldest first."""
    found = []
    for scalars in sorted(work_dir.glob('*/vis_data/scalars.json')):
        for line in scalars.read_text().splitlines():
            record = json.loads(line)
            if 'accuracy/top1' in record:
                found.append(record['accuracy/top1'])
    return found

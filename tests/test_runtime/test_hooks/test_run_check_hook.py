"""RunCheckHook: the dataset's class folders against the head's classes,
labels, pipelines and widths, loop settings; a checkpoint's classes
against the dataset's, another model's checkpoint; output paths that
cannot be written are refused before the work, and one training at a
time in a work dir."""

import fcntl
import os
import os.path as osp
import shutil
import signal
import socket
from unittest import mock

import pytest
import torch
from mmengine.config import Config
from mmengine.evaluator import DumpResults
from mmengine.registry import RUNNERS

from t2t_plugin.runtime.checkpoint_fit import whole_model_error
from t2t_plugin.runtime.hooks import (
    RunCheckError,
    class_mismatch,
    release_locks,
    run_check_hook,
)
from t2t_plugin.runtime.hooks.run_check_hook import _where, pipeline_problem
from t2t_preflight.errors import CheckpointError, ConfigError

from ...helpers import (
    CUSTOM,
    DEMO,
    DIGIT_CLASSES,
    TINY_DEMO,
    as_dict,
    custom_options,
    digit_model,
    door,
    forget_visualizers_and_loggers,
    held_work_dir,
    last_line,
    one_line,
    plain_runner,
    run_main,
    run_mmpretrain_tool,
    save_checkpoint,
    write_class_folders,
)


@pytest.mark.parametrize('folders', [4, 1])
def test_class_folders_must_match_num_classes(folders, tmp_path):
    root = write_class_folders(tmp_path / 'data', folders)
    options = custom_options(root)
    names = ', '.join(f'c{i}' for i in range(folders))
    # the line names the environment variable of the config's num_classes
    expected = (
        f'train_dataloader: the dataset has {folders} classes in '
        f'{root}/train ({names}), but model.head.num_classes=3; set '
        f'NUM_CLASSES={folders}, or give the dataset 3 class folders.'
        if folders > 1
        else f'train_dataloader: the dataset has 1 class in {root}/train '
        '(c0); a classifier needs at least two, one folder of images each.'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'ours',
        '--cfg-options', *options,
    )  # fmt: skip
    assert ours.returncode == 1
    assert one_line(ours.stderr) == expected
    if folders == 4:  # mmpretrain's own tool: its traceback ends with ours
        theirs = run_mmpretrain_tool(
            'train', CUSTOM, '--work-dir', tmp_path / 'theirs',
            '--cfg-options', *options,
        )  # fmt: skip
        assert theirs.returncode == 1
        assert last_line(theirs.stderr).endswith(': ' + expected)
    else:
        error = door(CUSTOM, as_dict(options), tmp_path / 'door')
        assert isinstance(error, RunCheckError) and str(error) == expected


@pytest.mark.parametrize('prefix', ['train', ''])
def test_messages_name_a_relative_folder_once(prefix, tmp_path, monkeypatch):
    # mmengine joins data_root to a relative data_prefix as it builds the
    # dataset: the folder in a message must not repeat the root
    from mmpretrain.datasets import CustomDataset

    write_class_folders(tmp_path / 'data', 2)
    monkeypatch.chdir(tmp_path)
    root = 'data/train' if not prefix else 'data'
    dataset = CustomDataset(data_root=root, data_prefix=prefix, pipeline=[])
    assert osp.normpath(_where(dataset)) == 'data/train'


def test_an_empty_val_class_folder_is_a_warning(tmp_path):
    # its label is its folder's index still: nothing shifts, the run goes
    # on with mmpretrain's own warning (the log shows it)
    root = write_class_folders(tmp_path / 'data', 3)
    shutil.rmtree(root / 'val' / 'c1')
    (root / 'val' / 'c1').mkdir()
    options = custom_options(root)
    warning = 'Found no valid file in the folder c1.'
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert warning in ours.stdout + ours.stderr
    assert (tmp_path / 'w' / 'epoch_1.pth').is_file()
    assert door(CUSTOM, as_dict(options), tmp_path / 'door') is None
    theirs = run_mmpretrain_tool(
        'train', CUSTOM, '--work-dir', tmp_path / 'theirs',
        '--cfg-options', *options,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr[-2000:]


def test_labels_that_fit_a_longer_class_list_are_a_warning(tmp_path):
    # ImageNet's 1000 classes, an annotation file of 3 of them: the head
    # of 3 classes fits the labels; mmengine's Runner trains it
    root = write_class_folders(tmp_path / 'data', 3, splits=('train',))
    lines = [
        f'c{label}/{index}.jpg {label}\n'
        for label in range(3)
        for index in range(2)
    ]
    (root / 'train.txt').write_text(''.join(lines))
    options = as_dict(custom_options(root))
    for loader in ('train_dataloader', 'val_dataloader'):
        options[f'{loader}.dataset'] = dict(
            _delete_=True,
            type='ImageNet',
            data_root=str(root),
            data_prefix='train',
            ann_file='train.txt',
            pipeline=Config.fromfile(CUSTOM)[loader].dataset.pipeline,
        )
    forget_visualizers_and_loggers()
    cfg = Config.fromfile(CUSTOM)
    cfg.merge_from_dict(options)
    cfg.work_dir = str(tmp_path / 'door')
    runner = plain_runner(cfg)
    with mock.patch.object(runner.logger, 'warning') as warn:
        runner.train()
    logged = [call.args[0] for call in warn.call_args_list]
    mine = [line for line in logged if 'its labels fit the head' in line]
    assert len(mine) == 2  # train and val
    assert mine[0].startswith(
        'train_dataloader: the dataset lists 1000 classes (tench, Tinca '
        'tinca, goldfish, '
    )
    assert mine[0].endswith(
        ' and 995 more), model.head.num_classes=3; its labels fit the '
        'head, so the run goes on.'
    )
    # labels beyond the head: refused, as the loss would fail on them
    (root / 'train.txt').write_text(''.join(lines) + 'c0/0.jpg 7\n')
    error = door(CUSTOM, options, tmp_path / 'door2')
    assert isinstance(error, RunCheckError)
    assert str(error) == (
        f'train_dataloader: {root}/train.txt: label 7 of sample 6 '
        f'({root}/train/c0/0.jpg) is outside 0 to 2, the classes of '
        'model.head.num_classes=3 (1 label(s) in all); fix the labels, or '
        'set model.head.num_classes (and data_preprocessor.num_classes) '
        'to 8.'
    )


def test_a_hidden_folder_is_named_where_it_changes_the_count(tmp_path):
    root = write_class_folders(tmp_path / 'data', 3)
    (root / 'train' / '.ipynb_checkpoints').mkdir()  # as Jupyter leaves it
    options = custom_options(root)
    expected = (
        f'train_dataloader: the dataset has 4 classes in {root}/train '
        '(.ipynb_checkpoints, c0, c1, c2), but model.head.num_classes=3; '
        'set NUM_CLASSES=4, or give the dataset 3 class folders (the '
        'hidden folder(s) .ipynb_checkpoints count as classes: delete them '
        'or move them out of the class folders).'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    assert not (tmp_path / 'w').exists()
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == expected


def test_train_and_val_folders_of_other_classes(tmp_path):
    # folder indices: c2 is label 2 in training, 1 in validation
    root = write_class_folders(tmp_path / 'data', 3)
    shutil.rmtree(root / 'val' / 'c1')
    write_class_folders(root, ['c3'], splits=('val',))
    options = custom_options(root)
    expected = (
        'val_dataloader has 3 classes (c0, c2, c3), but train_dataloader '
        'has 3 (c0, c1, c2); both must list the same classes in the same '
        'order.'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == expected
    # an annotation file's labels may agree with the training's: warned
    lines = ''.join(f'c{c}/0.jpg {c}\n' for c in (0, 2))
    (root / 'val.txt').write_text(lines)
    options = as_dict(options)
    options['val_dataloader.dataset.ann_file'] = 'val.txt'
    options['val_dataloader.dataset.metainfo'] = dict(classes=['a', 'b', 'c'])
    write_class_folders(root, 3, splits=('val',))
    assert door(CUSTOM, options, tmp_path / 'door2') is None


def test_untileable_pipeline_size_is_one_line():
    t2t = digit_model().backbone.tokens_to_token  # strides 1, 1, 2
    problem = pipeline_problem(
        [dict(type='RandomCrop', crop_size=7), dict(type='PackInputs')], t2t
    )
    assert problem.startswith('T2T-ViT cannot tile a 7x7 input')
    assert (
        pipeline_problem([dict(type='RandomCrop', crop_size=8)], t2t) is None
    )
    assert pipeline_problem([dict(type='LoadImageFromFile')], t2t) == (
        'loads 3-channel images, but the backbone takes in_channels=1; set '
        "model.backbone.in_channels or LoadImageFromFile's color_type to "
        'match.'
    )
    # made grey after loading, as the digits demo's ConvertImage does
    grey = [
        dict(type='LoadImageFromFile'),
        dict(type='ConvertImage', channels=1),
    ]
    assert pipeline_problem(grey, t2t) is None


def test_every_child_of_a_dataset_wrapper_is_checked(tmp_path):
    # the second dataset of a ConcatDataset: its pipeline named by its
    # dotted key
    root = write_class_folders(tmp_path / 'data', 3)
    other = write_class_folders(tmp_path / 'other', 3, splits=('train',))
    crops = {root: 64, other: 60}
    options = as_dict(custom_options(root))
    options['train_dataloader.dataset'] = dict(
        _delete_=True,
        type='ConcatDataset',
        datasets=[
            dict(
                type='CustomDataset',
                data_root=str(folder),
                data_prefix='train',
                pipeline=[
                    dict(type='LoadImageFromFile'),
                    dict(type='RandomResizedCrop', scale=crop),
                    dict(type='PackInputs'),
                ],
            )
            for folder, crop in crops.items()
        ],
    )
    expected = (
        'train_dataloader.dataset.datasets.1.pipeline: T2T-ViT cannot tile '
        'a 60x60 input: its soft splits (kernels (7, 3, 3), strides (2, 2, '
        '2), paddings (3, 1, 1)) need both sides to be multiples of 8. '
        'Resize or pad the image, e.g. to 64x64.'
    )
    for build in (plain_runner, RUNNERS.build):
        error = door(CUSTOM, options, tmp_path / 'door', build=build)
        assert isinstance(error, RunCheckError)
        assert str(error) == expected


def test_mmpretrain_t2t_vit_is_not_checked_as_ours():
    """mmpretrain's own ``T2T_ViT`` has a ``tokens_to_token`` too, without
    our module's size rules: the pipeline checks leave it to its own
    forward (they raised an AttributeError on it)."""
    from types import SimpleNamespace

    from mmpretrain.models import T2T_ViT

    from t2t_plugin.runtime.hooks.run_checks import t2t_module

    theirs = SimpleNamespace(
        backbone=T2T_ViT(
            img_size=32, embed_dims=64, num_layers=1,
            layer_cfgs=dict(num_heads=4),
        )
    )  # fmt: skip
    assert t2t_module(SimpleNamespace(model=theirs)) is None
    ours = SimpleNamespace(backbone=digit_model().backbone)
    assert (
        t2t_module(SimpleNamespace(model=ours))
        is ours.backbone.tokens_to_token
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
    assert isinstance(error, CheckpointError)
    assert str(error) == (
        f"The checkpoint {checkpoint} classifies 3 classes, this model's "
        'head 10 (num_classes); use the config it was trained with (its '
        'model.head.num_classes).'
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


def test_a_second_training_into_a_work_dir_is_refused(tmp_path):
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    lock = work_dir / 'train.lock'
    with held_work_dir(work_dir) as first:
        expected = (
            f'{work_dir} is in use by another training (process {first.pid} '
            f'on {socket.gethostname()}, see {lock}); choose another '
            '--work-dir, or wait until it has ended.'
        )
        ours = run_main('train', DEMO, '--work-dir', work_dir)
        assert ours.returncode == 1 and one_line(ours.stderr) == expected
        error = door(DEMO, {}, work_dir)
        assert isinstance(error, RunCheckError) and str(error) == expected
        assert not list(work_dir.glob('*.pth'))
    # the first run is gone (killed): the system gave its lock back, and
    # this run gives its own back at the end
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO
    )
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (work_dir / 'epoch_1.pth').is_file()
    run_check_hook.lock_work_dir(str(work_dir))  # free
    release_locks()


def test_a_killed_training_leaves_no_lock_in_its_workers(tmp_path):
    """A training killed (-9) while the data-loader workers it forked still
    run: its lock is free at once (the workers do not share it, as they
    would an flock). The training is a fork of this process, which has
    imported the plugin already; its worker runs until the test has
    looked."""
    locked, says_locked = os.pipe()
    looked_at, has_looked = os.pipe()
    training = os.fork()
    if training == 0:  # never returns into the test
        try:
            os.close(locked)
            os.close(has_looked)
            run_check_hook.lock_work_dir(str(tmp_path))
            if os.fork() == 0:  # a worker: the lock's file is open in it
                os.close(says_locked)
                os.read(looked_at, 1)
                os._exit(0)
            os.write(says_locked, b'locked')
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    os.close(says_locked)
    os.close(looked_at)
    try:
        assert os.read(locked, 16) == b'locked'
        _, status = os.waitpid(training, 0)
        assert os.WIFSIGNALED(status)
        assert os.WTERMSIG(status) == signal.SIGKILL
        run_check_hook.lock_work_dir(str(tmp_path))  # free
        release_locks()
    finally:
        os.close(locked)
        os.close(has_looked)  # the worker ends


def test_a_run_gives_back_its_own_lock_only(tmp_path):
    """``release_locks(work_dir)``, as a run's end calls it, frees that
    run's lock and keeps the others this process holds."""

    def lock_in_another_process(work_dir) -> int:
        # the system's lock itself: a fork's copy of this process's table
        # of held locks would answer that it holds them
        child = os.fork()
        if child == 0:  # never returns into the test
            try:
                with open(run_check_hook.lock_path(str(work_dir))) as lock:
                    fcntl.lockf(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
                os._exit(0)
            except OSError:
                os._exit(3)
            finally:
                os._exit(1)
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])

    first, second = tmp_path / 'first', tmp_path / 'second'
    first.mkdir()
    second.mkdir()
    run_check_hook.lock_work_dir(str(first))
    run_check_hook.lock_work_dir(str(second))
    try:
        release_locks(str(first))
        assert lock_in_another_process(first) == 0
        assert lock_in_another_process(second) == 3
    finally:
        release_locks()

"""Overrides that take or are refused: a config file's variables given on
the command line reach every key the file set from them (tools/train.py),
or are refused where a tool merges them after loading (mmpretrain's
train.py); a misspelt key at any depth gets "did you mean" before a work
dir is made; a schedule that ends after training is one warning line;
tools/train.py answers such mistakes before the model code is imported."""

import inspect
from pathlib import Path

import pytest
import torch
from mmengine.runner import Runner
from mmpretrain.registry import MODELS

from t2t_plugin.engine import ConfigError, check_config, load_config
from t2t_preflight.config import RUNNER_KEYS, schedule_mismatch

from ..helpers import (
    DEMO,
    ROOT,
    answer_before_models,
    one_line,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
CLASSIFICATION_CONFIGS = sorted(
    str(path) for path in (ROOT / 'configs').glob('t2t-vit-*.py')
)


def test_variables_of_the_file_reach_every_key_set_from_them(tmp_path):
    cfg = load_config(
        LITE,
        {'data_root': str(tmp_path), 'num_classes': 4, 'max_epochs': 3},
        import_custom_modules=False,
    )
    for loader in ('train', 'val', 'test'):
        dataset = cfg[f'{loader}_dataloader'].dataset
        assert dataset.data_root == str(tmp_path)
    assert cfg.model.head.num_classes == 4
    assert cfg.data_preprocessor.num_classes == 4
    assert cfg.train_cfg.max_epochs == 3
    assert cfg.param_scheduler[1].end == 3  # the cosine ends with training
    assert cfg.filename == LITE  # the dumped config keeps the name
    # the file's bases are read as before
    assert cfg.default_hooks.run_check.type == 'RunCheckHook'


def test_variables_of_a_config_beside_its_base(tmp_path):
    """A user's config built on ours, with relative bases and non-ASCII
    text: the copy that is read keeps both."""
    config = tmp_path / 'configs' / 'mine.py'
    config.parent.mkdir()
    (config.parent / 'base.py').write_text("label = 'é'\nsteps = 2\n")
    config.write_text(
        "_base_ = ['./base.py']\n"
        "note = 'données'; root = 'data/é'\n"
        'loader = dict(root=root, note=note)\n'
    )
    cfg = load_config(config, {'root': '/mine/ü', 'steps': 5})
    assert cfg.loader == dict(root='/mine/ü', note='données')
    assert (cfg.label, cfg.steps, cfg.root) == ('é', 5, '/mine/ü')
    assert cfg.filename == str(config)


def test_train_tool_reads_data_root_from_the_command_line(tmp_path):
    work_dir = tmp_path / 'work'
    result = run_main(
        'train', LITE, '--work-dir', work_dir,
        '--cfg-options', f'data_root={tmp_path}/mine', 'num_classes=4',
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        f'Dataset not found: expected {tmp_path}/mine '
        '(see docs/custom_data.md).\n'
    )
    assert not work_dir.exists()


def test_mmpretrain_train_tool_refuses_a_variable_that_does_not_reach(
    tmp_path,
):
    work_dir = tmp_path / 'work'
    result = run_mmpretrain_tool(
        'train', LITE, '--work-dir', work_dir,
        '--cfg-options', 'data_root=/my/data',
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "t2t_preflight.config.ConfigError: data_root='/my/data' does "
        'not reach train_dataloader.dataset.data_root, '
        'val_dataloader.dataset.data_root, test_dataloader.dataset.data_root, '
        "which the file set from data_root='data/custom' when it was "
        'loaded; set those keys instead, or use tools/train.py, whose '
        '--cfg-options data_root=... reaches every key the file set from it.'
    )
    assert not work_dir.exists()


def test_a_key_set_directly_is_no_stale_variable():
    cfg = load_config(
        LITE,
        {'train_dataloader.dataset.data_root': 'elsewhere'},
        import_custom_modules=False,
    )
    assert cfg.data_root == 'data/custom'
    assert cfg.val_dataloader.dataset.data_root == 'data/custom'


def test_misspelt_nested_key_in_train_tool_before_the_work_dir(tmp_path):
    work_dir = tmp_path / 'work'
    result = run_main(
        'train', LITE, '--work-dir', work_dir,
        '--cfg-options', 'train_cfg.max_epoch=3',
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f'Invalid options for {LITE}: --cfg-options train_cfg.max_epoch: '
        "train_cfg has no key 'max_epoch'; did you mean 'max_epochs'?\n"
    )
    assert not work_dir.exists()


def test_misspelt_nested_key_in_mmpretrain_train_tool(tmp_path):
    work_dir = tmp_path / 'work'
    result = run_mmpretrain_tool(
        'train', LITE, '--work-dir', work_dir,
        '--cfg-options', 'train_cfg.max_epoch=3',
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        't2t_preflight.config.ConfigError: train_cfg.max_epoch: '
        "EpochBasedTrainLoop takes no argument 'max_epoch'; did you mean "
        "'max_epochs'?"
    )
    assert not work_dir.exists()


def test_misspelt_model_key_of_a_config_file_names_the_class(tmp_path):
    """A typo in the user's own file, deep in the model: refused from the
    class the dict goes to (the head's loss), before the work dir."""
    data = write_class_folders(tmp_path / 'data', ('cat', 'dog', 'fox'), 1)
    config = tmp_path / 'mine.py'
    config.write_text(
        f'_base_ = [{LITE!r}]\n'
        f'data_root = {str(data)!r}\n'
        'train_dataloader = dict(dataset=dict(data_root=data_root))\n'
        'val_dataloader = dict(dataset=dict(data_root=data_root))\n'
        'test_dataloader = val_dataloader\n'
        'model = dict(head=dict(loss=dict(label_smoothing=0.2)))\n'
    )
    work_dir = tmp_path / 'work'
    result = run_main('train', config, '--work-dir', work_dir)
    assert result.returncode == 1
    assert result.stderr == (
        'model.head.loss.label_smoothing: LabelSmoothLoss takes no argument '
        "'label_smoothing'; did you mean 'label_smooth_val'?\n"
    )
    assert not work_dir.exists()


@pytest.mark.parametrize(
    'key, expected',
    [
        ('train_cfgg.max_epochs', "the config has no key 'train_cfgg'; did "
         "you mean 'train_cfg'?"),
        ('model.backbone.drop_path_rat', "model.backbone has no key "
         "'drop_path_rat'; did you mean 'drop_path_rate'?"),
        ('param_scheduler.1.eta_mn', "param_scheduler.1 has no key "
         "'eta_mn'; did you mean 'eta_min'?"),
    ],
)  # fmt: skip
def test_misspelt_options_at_any_depth(key, expected):
    with pytest.raises(ConfigError) as caught:
        load_config(LITE, {key: 1}, import_custom_modules=False)
    assert str(caught.value) == f'--cfg-options {key}: {expected}'


def test_a_config_made_in_code_is_checked_too():
    from mmengine.config import Config

    cfg = Config(dict(train_cfg=dict(by_epoch=True, max_epoch=3)))
    with pytest.raises(ConfigError) as caught:
        check_config(cfg)
    assert str(caught.value) == (
        'train_cfg.max_epoch: EpochBasedTrainLoop takes no argument '
        "'max_epoch'; did you mean 'max_epochs'?"
    )


def test_new_keys_without_a_close_name_are_accepted():
    cfg = load_config(
        LITE,
        {'model.backbone.with_cp': True, 'train_cfg.val_begin': 2},
        import_custom_modules=False,
    )
    assert cfg.model.backbone.with_cp is True
    assert check_config(cfg) is None


def test_schedule_that_ends_after_training_is_one_warning():
    cfg = load_config(LITE, {'train_cfg.max_epochs': 3})
    assert schedule_mismatch(cfg) == (
        'param_scheduler.1.end=12 is after the end of training '
        '(train_cfg.max_epochs=3): the CosineAnnealingLR stops early; set '
        'param_scheduler.1.end=3 to finish it.'
    )
    # through the variable, the schedule follows
    cfg = load_config(LITE, {'max_epochs': 3})
    assert schedule_mismatch(cfg) is None
    cfg = load_config(
        ROOT / 'configs' / 't2t-vit-14_8xb64_in1k.py',
        {'train_cfg.max_epochs': 100},
    )
    assert schedule_mismatch(cfg) == (
        'param_scheduler.1.end=300 is after the end of training '
        '(train_cfg.max_epochs=100): the CosineAnnealingLR stops early; set '
        'param_scheduler.1.end=100 (and param_scheduler.1.T_max) to finish '
        'it.'
    )


def test_schedule_that_ends_before_training_is_one_warning():
    loaded = load_config(LITE)
    cfg = load_config(LITE, {'train_cfg.max_epochs': 30})
    assert schedule_mismatch(cfg, loaded) == (
        'param_scheduler.1.end=12 is before the end of training '
        '(train_cfg.max_epochs=30), which the file ended it with: the '
        'CosineAnnealingLR ends early and its last value stays; set '
        'param_scheduler.1.end=30 to stretch it.'
    )
    assert check_config(cfg) == schedule_mismatch(cfg, loaded)
    # the ImageNet recipe's cool-down: the cosine ends 10 epochs early
    imagenet = ROOT / 'configs' / 't2t-vit-14_8xb64_in1k.py'
    cfg = load_config(imagenet)
    assert schedule_mismatch(cfg, load_config(imagenet)) is None
    assert check_config(cfg) is None


def test_train_tool_prints_the_schedule_warning_once(tmp_path):
    result = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'work',
        '--cfg-options', 'train_cfg.max_epochs=1',
        'train_dataloader.dataset.indices=64',
        'val_dataloader.dataset.indices=32',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if 'param_scheduler' in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        'WARNING - param_scheduler.1.end=40 is after the end of training '
        '(train_cfg.max_epochs=1): the CosineAnnealingLR stops early; set '
        'param_scheduler.1.end=1 to finish it.'
    )
    # by default the progress lines, not the environment or the config
    assert 'Epoch(train) [1][1/1]' in result.stdout
    assert 'Epoch(val) [1][1/1]' in result.stdout
    assert 'Config:' not in result.stdout
    assert 'System environment' not in result.stdout
    log = next((tmp_path / 'work').glob('*/*.log')).read_text()
    assert 'Config:' in log and 'System environment' in log
    # a test of the run reads no schedule: the saved config (whose
    # scheduler ends after training) gives no warning there
    work = tmp_path / 'work'
    tested = run_main(
        'test', work / Path(DEMO).name, work / 'epoch_1.pth',
        '--work-dir', tmp_path / 'test',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert 'param_scheduler' not in tested.stdout + tested.stderr
    assert tested.stdout.splitlines()[-2].startswith('accuracy/top1: ')


@pytest.mark.parametrize('config', CLASSIFICATION_CONFIGS)
def test_shipped_configs_pass_the_checks(config):
    cfg = load_config(config)
    # the 384 px fine-tuning reads the checkpoint of a 224 px run
    cfg.load_from = None
    assert check_config(cfg) is None


def test_runner_keys_are_those_of_mmengines_runner():
    assert set(inspect.signature(Runner).parameters) <= RUNNER_KEYS


# What is answered before the models' import, and what needs them: the
# dataset's class (where it looks for its data), mmengine's DumpResults.
# Both before the Runner: no work dir.
@pytest.mark.parametrize(
    'options, code, message, models',
    [
        ([], 1, 'Dataset not found: expected data/custom (see '
         'docs/custom_data.md).', True),
        (['--cfg-options', 'train_cfg.max_epoch=3'], 2,
         f"Invalid options for {LITE}: --cfg-options train_cfg.max_epoch: "
         "train_cfg has no key 'max_epoch'; did you mean 'max_epochs'?",
         False),
    ],
)  # fmt: skip
def test_train_tool_answers_before_importing_the_models(
    options, code, message, models, tmp_path
):
    stderr, stdout = answer_before_models(
        'train', LITE, '--work-dir', tmp_path / 'work', *options,
        cwd=tmp_path,
    )  # fmt: skip
    assert stderr == message
    assert stdout == [f'exit {code}', f'imported {models} {models} {models}']
    assert not (tmp_path / 'work').exists()


@pytest.mark.parametrize(
    'options, code, message, models',
    [
        ([], 1, 'Dataset not found: expected data/custom (see '
         'docs/custom_data.md).', True),
        (['--out', 'scores.txt', '--cfg-options', 'data_root=.'], 2,
         f'Invalid options for {LITE}: --out scores.txt: The output file '
         "must be a pkl file (mmengine's DumpResults takes .pkl or "
         '.pickle; --out-item metrics saves the metrics as .json or .yaml '
         'too).', True),
        (['--cfg-options', 'test_dataloader.batch_sise=3'], 2,
         f'Invalid options for {LITE}: --cfg-options '
         "test_dataloader.batch_sise: test_dataloader has no key "
         "'batch_sise'; did you mean 'batch_size'?", False),
    ],
)  # fmt: skip
def test_test_tool_answers_before_importing_the_models(
    options, code, message, models, tmp_path
):
    (tmp_path / 'epoch_1.pth').write_bytes(b'')
    write_class_folders(tmp_path, 3, splits=('val',))  # data_root=.
    stderr, stdout = answer_before_models(
        'test', LITE, 'epoch_1.pth', '--work-dir', tmp_path / 'work',
        *options, cwd=tmp_path,
    )  # fmt: skip
    assert stderr == message
    assert stdout == [f'exit {code}', f'imported {models} {models} {models}']
    assert not (tmp_path / 'work').exists()


def run_on_folders(tool: str, root: Path, work_dir: Path, cwd: Path):
    """:func:`answer_before_models` of the small-image recipe on the class
    folders ``root`` (tools/test.py with an empty checkpoint file, which
    nothing reads before these answers)."""
    checkpoint = [cwd / 'epoch_1.pth'] if tool == 'test' else []
    for path in checkpoint:
        path.write_bytes(b'')
    return answer_before_models(
        tool, LITE, *checkpoint, '--work-dir', work_dir,
        '--cfg-options', f'data_root={root}', cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_class_count_is_answered_before_the_first_step(tool, tmp_path):
    # RunCheckHook, as the datasets are built: nothing left behind
    root = write_class_folders(tmp_path / 'data', ('cat', 'dog'), 1)
    key = 'test_dataloader' if tool == 'test' else 'train_dataloader'
    folder = 'val' if tool == 'test' else 'train'
    checkpoint = []
    if tool == 'test':
        checkpoint = [tmp_path / 'model.pth']
        model = MODELS.build(load_config(LITE).model)
        torch.save(dict(state_dict=model.state_dict()), checkpoint[0])
    result = run_main(
        tool, LITE, *checkpoint, '--work-dir', tmp_path / 'work',
        '--cfg-options', f'data_root={root}',
    )  # fmt: skip
    assert result.returncode == 1
    assert one_line(result.stderr) == (
        f'{key}: the dataset has 2 classes in {root}/{folder} (cat, dog), '
        'but model.head.num_classes=3; set num_classes=2, or give the '
        'dataset 3 class folders.'
    )
    assert not (tmp_path / 'work').exists()


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_unwritable_work_dir_is_answered_before_importing_the_models(
    tool, tmp_path
):
    root = write_class_folders(tmp_path / 'data', ('cat', 'dog', 'fox'), 1)
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    stderr, stdout = run_on_folders(tool, root, blocker / 'work', tmp_path)
    assert stderr == (
        f'--work-dir {blocker / "work"}: {blocker} is a file, not a folder.'
    )
    assert stdout == ['exit 1', 'imported False False False']


def test_custom_imports_that_fail_are_one_line(tmp_path):
    config = tmp_path / 'mine.py'
    config.write_text(
        "custom_imports = dict(imports=['no_such_toolbox'])\n"
        "model = dict(type='ImageClassifier')\n"
    )
    result = run_main('train', config, '--work-dir', tmp_path / 'work')
    assert result.returncode == 2
    assert result.stderr == (
        f'Cannot load config {config}: ImportError: Failed to import '
        'no_such_toolbox\n'
    )
    assert not (tmp_path / 'work').exists()

"""Configs read and overrides merged exactly as mmengine does, through our
tools and mmpretrain's: the recipes' environment variables reach every key
set from them, a file variable given as an option is merged with one
warning line, {{ fileDirname }} is the config's own folder; a misspelt
key at any depth gets "did you mean" before a work dir is made; a
schedule that ends after training is one warning line; tools/train.py
answers such mistakes before the model code is imported."""

import inspect
import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner
from mmpretrain.registry import MODELS

from t2t_plugin.runtime import ConfigError, check_config, load_config
from t2t_preflight.config import RUNNER_KEYS, misspelt_option
from t2t_preflight.schedule import schedule_mismatch

from ..helpers import (
    DEMO,
    ROOT,
    answers_before_models,
    load_tool,
    one_line,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
CLASSIFICATION_CONFIGS = sorted(
    str(path) for path in (ROOT / 'configs').glob('t2t-vit-*.py')
)


class Captured(Exception):
    """Raised in place of building a runner, once its config is kept."""


def runner_configs(monkeypatch) -> list:
    """The configs that reach mmengine's ``Runner.from_cfg`` (our runner's
    checks first), collected instead of building a runner."""
    kept = []

    def keep(cls, cfg, *args, **kwargs):
        kept.append(cfg)
        raise Captured

    monkeypatch.setattr(Runner, 'from_cfg', classmethod(keep))
    return kept


# the parts of a resolved config that mmpretrain's train.py does not add
# to (it gives the loaders pin_memory, persistent_workers, collate_fn)
RESOLVED = (
    'model', 'data_preprocessor', 'param_scheduler', 'train_cfg',
    'optim_wrapper', 'work_dir', 'data_root', 'num_classes',
)  # fmt: skip


def resolved(cfg) -> dict:
    parts = {key: cfg.get(key) for key in RESOLVED}
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        parts[loader] = cfg[loader].dataset if cfg.get(loader) else None
    return Config(parts).to_dict()


def through_both_tools(monkeypatch, config, *options) -> tuple[dict, dict]:
    """The resolved config tools/train.py and mmpretrain's tools/train.py
    hand to the runner for ``config`` and ``--cfg-options options``."""
    kept = runner_configs(monkeypatch)
    work = ['--work-dir', 'work_dirs/same']
    extra = ['--cfg-options', *options] if options else []
    run_main('train', config, *work, *extra)
    run_mmpretrain_tool('train', config, *work, *extra)
    assert len(kept) == 2, 'a tool stopped before its runner'
    return resolved(kept[0]), resolved(kept[1])


def test_environment_variables_of_the_recipe_reach_every_key(
    tmp_path, monkeypatch
):
    """DATA_ROOT, NUM_CLASSES, MAX_EPOCHS: every key the recipe sets from
    them, identical through our train tool and mmpretrain's."""
    data = write_class_folders(tmp_path / 'mine', ('a', 'b', 'c', 'd'), 1)
    for name, value in (('DATA_ROOT', data), ('NUM_CLASSES', 4),
                        ('MAX_EPOCHS', 3)):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    ours, theirs = through_both_tools(monkeypatch, LITE)
    assert ours == theirs
    for loader in ('train', 'val', 'test'):
        assert ours[f'{loader}_dataloader']['data_root'] == str(data)
    assert ours['model']['head']['num_classes'] == 4
    assert ours['data_preprocessor']['num_classes'] == 4
    assert ours['train_cfg']['max_epochs'] == 3
    assert ours['param_scheduler'][1]['end'] == 3  # the cosine follows
    # the reader of every tool and API gives what mmengine's gives
    cfg = load_config(LITE, import_custom_modules=False)
    assert cfg.to_dict() == Config.fromfile(LITE).to_dict()
    assert cfg.filename == LITE


def test_train_tool_reads_data_root_from_the_environment(
    tmp_path, monkeypatch
):
    work_dir = tmp_path / 'work'
    monkeypatch.setenv('DATA_ROOT', f'{tmp_path}/mine')
    monkeypatch.setenv('NUM_CLASSES', '4')
    result = run_main('train', LITE, '--work-dir', work_dir)
    assert result.returncode == 1
    assert result.stderr == (
        f'Dataset not found: expected {tmp_path}/mine '
        '(see docs/custom_data.md).\n'
    )
    assert not work_dir.exists()


STALE = (
    "WARNING - --cfg-options data_root='/my/data' sets data_root only: "
    'train_dataloader.dataset.data_root, val_dataloader.dataset.data_root, '
    "test_dataloader.dataset.data_root keep 'data/custom', which the file "
    'set from data_root when it was read; set DATA_ROOT=/my/data in the '
    'environment instead (the config reads data_root from it), or set '
    'those keys.'
)


def test_a_variable_given_as_an_option_is_merged_with_one_warning(
    tmp_path, monkeypatch
):
    """As mmengine merges it, through our train tool and mmpretrain's: the
    top-level value changes, the keys keep theirs, one warning line (it
    names the environment variable), and the run goes on."""
    write_class_folders(tmp_path / 'data' / 'custom', ('a', 'b', 'c'), 1)
    monkeypatch.chdir(tmp_path)
    kept = runner_configs(monkeypatch)
    for tool, runner in (
        (run_main, []),
        (run_mmpretrain_tool, []),
        (run_main, ['runner_type=Runner']),  # mmengine's own
    ):
        result = tool(
            'train', LITE, '--cfg-options', 'data_root=/my/data', *runner
        )
        lines = (result.stdout + result.stderr).splitlines()
        warned = [line for line in lines if 'sets data_root' in line]
        assert len(warned) == 1 and warned[0].endswith(STALE), lines
    assert [cfg.data_root for cfg in kept] == ['/my/data'] * 3
    assert [cfg.train_dataloader.dataset.data_root for cfg in kept] == [
        'data/custom'
    ] * 3


# what tools/train.py needs of a config to reach its runner
RUNNABLE = (
    "model = dict(type='ImageClassifier', backbone=dict(type='T2TViT', "
    "arch='7'), head=dict(type='LinearClsHead', num_classes=2, "
    'in_channels=256))\n'
    "train_dataloader = dict(batch_size=2, dataset=dict(type='CustomDataset',"
    " data_root=data_root, pipeline=[]), sampler=dict(type='DefaultSampler',"
    ' shuffle=True))\n'
    "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))\n"
    "default_scope = 'mmpretrain'\n"
)
DATA = "data_root = '{{ fileDirname }}/data'\n"
LOOP = 'train_cfg = dict(by_epoch=True, max_epochs=steps)\n'


@pytest.mark.parametrize(
    'text, base',
    [
        # {{ fileDirname }}: the config's own folder
        (f'{DATA}steps = 1\n{LOOP}', ''),
        # an override of a variable set only in a base
        (f"_base_ = ['./base.py']\n{DATA}", f'steps = 1\n{LOOP}'),
        # an annotated variable
        (f"data_root: str = '{{{{ fileDirname }}}}/data'\nsteps: int = 1\n"
         f'{LOOP}', ''),
        # the word read_base in a comment
        (f'# not read_base()\n{DATA}steps = 1\n{LOOP}', ''),
    ],
)  # fmt: skip
def test_a_users_config_is_read_and_merged_as_mmengine_does(
    text, base, tmp_path, monkeypatch
):
    """With --cfg-options on one of its variables, through our train tool
    and mmpretrain's: the real folder, and the option merged."""
    folder = tmp_path / 'configs'
    data = write_class_folders(folder / 'data', ('a', 'b'), 1)
    if base:
        (folder / 'base.py').write_text(base)
    config = folder / 'mine.py'
    config.write_text(text + RUNNABLE)
    ours, theirs = through_both_tools(monkeypatch, config, 'steps=2')
    assert ours == theirs
    assert ours['train_dataloader']['data_root'] == str(data)
    assert ours['train_cfg']['max_epochs'] == 1  # set when the file was read
    expected = Config.fromfile(config)
    expected.merge_from_dict({'steps': 2})
    cfg = load_config(config, {'steps': 2})
    assert cfg.to_dict() == expected.to_dict()
    assert cfg.steps == 2


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
        't2t_preflight.errors.ConfigError: train_cfg.max_epoch: '
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
    assert str(caught.value) == (
        f'Invalid options for {LITE}: --cfg-options {key}: {expected}'
    )


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
    check_config(cfg)  # no ConfigError


def test_schedule_that_ends_after_training_is_one_warning(monkeypatch):
    cfg = load_config(LITE, {'train_cfg.max_epochs': 3})
    assert schedule_mismatch(cfg) == (
        'param_scheduler.1.end=12 is after the end of training '
        '(train_cfg.max_epochs=3): the CosineAnnealingLR stops early; set '
        'param_scheduler.1.end=3 to finish it.'
    )
    # through the variable, the schedule follows
    monkeypatch.setenv('MAX_EPOCHS', '3')
    cfg = load_config(LITE)
    assert schedule_mismatch(cfg) is None
    monkeypatch.delenv('MAX_EPOCHS')
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
    # the runner's check reads the file once, for this line too
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
    lines = (result.stdout + result.stderr).splitlines()
    warnings = [line for line in lines if 'param_scheduler' in line]
    assert len(warnings) == 1, warnings
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


def test_mmpretrain_tools_print_the_schedule_warning_in_a_training_only(
    tmp_path, monkeypatch
):
    """The warning comes as the runner trains: once in mmpretrain's
    train tool, not in its test tool (which reads no schedule). The
    runner's checks read the config file once, the tool once."""
    reads = []
    fromfile = Config.fromfile

    def counted(filename, *args, **kwargs):
        reads.append(str(filename))
        return fromfile(filename, *args, **kwargs)

    monkeypatch.setattr(Config, 'fromfile', staticmethod(counted))
    work = tmp_path / 'work'
    result = run_mmpretrain_tool(
        'train', DEMO, '--work-dir', work,
        '--cfg-options', 'train_cfg.max_epochs=1',
        'train_dataloader.dataset.indices=64',
        'val_dataloader.dataset.indices=32',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert reads == [str(DEMO)] * 2
    lines = (result.stdout + result.stderr).splitlines()
    warnings = [line for line in lines if 'param_scheduler.1.end=' in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith(
        'WARNING - param_scheduler.1.end=40 is after the end of training '
        '(train_cfg.max_epochs=1): the CosineAnnealingLR stops early; set '
        'param_scheduler.1.end=1 to finish it.'
    )
    tested = run_mmpretrain_tool(
        'test', work / Path(DEMO).name, work / 'epoch_1.pth',
        '--work-dir', tmp_path / 'test',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert 'accuracy/top1: ' in tested.stdout
    assert 'param_scheduler.1.end=' not in tested.stdout + tested.stderr


@pytest.mark.parametrize('config', CLASSIFICATION_CONFIGS)
def test_shipped_configs_pass_the_checks(config):
    cfg = load_config(config)
    # the 384 px fine-tuning reads the checkpoint of a 224 px run
    cfg.load_from = None
    check_config(cfg)  # no ConfigError


def test_runner_keys_are_those_of_mmengines_runner():
    assert set(inspect.signature(Runner).parameters) <= RUNNER_KEYS


# cfg.get('key'), cfg['key'], cfg.key, 'key' in cfg: a top-level read (not
# a method call)
READ = re.compile(
    r"\bcfg(?:\.get\(['\"](\w+)|\[['\"](\w+)|\.(\w+)\b(?!\())"
    r"|['\"](\w+)['\"] (?:not )?in cfg(?![.\w])"
)


def host_reads(path: Path, start: str = '', end: str = '') -> set[str]:
    """The top-level config keys the host source ``path`` reads (between
    the lines ``start`` and ``end`` where given), methods of Config left
    out."""
    text = path.read_text()
    if start:
        text = text[text.index(start) : text.index(end, text.index(start))]
    found = {next(filter(None, m)) for m in READ.findall(text)}
    return {
        key
        for key in found
        if not key.startswith('_') and not hasattr(Config, key)
    }


def test_every_top_level_key_the_hosts_tools_read_is_accepted():
    """Read from the sources: mmpretrain's (and, where installed, mmdet's
    and mmseg's) tools/train.py and test.py, and mmengine's Runner."""
    import mmengine.runner.runner as runner_module
    import mmpretrain

    sources = [Path(runner_module.__file__)]
    for package in (mmpretrain, *optional_packages('mmdet', 'mmseg')):
        tools = Path(package.__file__).parent / '.mim' / 'tools'
        sources += [tools / 'train.py', tools / 'test.py']
    read = set().union(*(host_reads(path) for path in sources))
    # the parser finds what the tools are known to read
    assert {'tta_model', 'tta_pipeline', 'runner_type', 'load_from',
            'sync_bn', 'compile', 'model_wrapper_cfg'} <= read  # fmt: skip
    assert read - RUNNER_KEYS == set()
    for key in ('tta_model', 'sync_bn', 'efficient_conv_bn_eval'):
        assert misspelt_option(Config.fromfile(LITE), key) is None
    # through our test tool: the option is taken, the run goes on to the
    # checkpoint (which is not there)
    result = run_main(
        'test', LITE, 'missing.pth', '--tta',
        '--cfg-options', 'tta_model.type=AverageClsScoreTTA',
    )  # fmt: skip
    assert one_line(result.stderr).startswith('Checkpoint not found')


def optional_packages(*names):
    """The packages of ``names`` that are installed."""
    import importlib

    for name in names:
        try:
            yield importlib.import_module(name)
        except ImportError:
            continue


# What is answered before the models' import, and what needs them: the
# dataset's class (where it looks for its data), mmengine's DumpResults.
# Both before the Runner: no work dir.
TRAIN_ANSWERS = [
    ([], 1, 'Dataset not found: expected data/custom (see '
     'docs/custom_data.md).', True),
    (['--cfg-options', 'train_cfg.max_epoch=3'], 2,
     f"Invalid options for {LITE}: --cfg-options train_cfg.max_epoch: "
     "train_cfg has no key 'max_epoch'; did you mean 'max_epochs'?",
     False),
]  # fmt: skip
TEST_ANSWERS = [
    ([], 1, 'Dataset not found: expected data/custom (see '
     'docs/custom_data.md).', True),
    (['--out', 'scores.txt', '--cfg-options',
      'test_dataloader.dataset.data_root=.'], 2,
     f'Invalid options for {LITE}: --out scores.txt: The output file '
     "must be a pkl file (mmengine's DumpResults takes .pkl or "
     '.pickle; --out-item metrics saves the metrics as .json or .yaml '
     'too).', True),
    (['--cfg-options', 'test_dataloader.batch_sise=3'], 2,
     f'Invalid options for {LITE}: --cfg-options '
     "test_dataloader.batch_sise: test_dataloader has no key "
     "'batch_sise'; did you mean 'batch_size'?", False),
]  # fmt: skip


def tool_case(tool: str, options: list, folder: Path) -> dict:
    """tools/train.py or tools/test.py of the small-image recipe with
    ``options`` in ``folder`` (for tools/test.py an empty checkpoint file,
    which nothing reads before these answers, and a val split there)."""
    checkpoint = []
    if tool == 'test':
        (folder / 'epoch_1.pth').write_bytes(b'')
        write_class_folders(folder, 3, splits=('val',))  # data_root=.
        checkpoint = ['epoch_1.pth']
    args = [LITE, *checkpoint, '--work-dir', folder / 'work', *options]
    return dict(tool=tool, args=args, cwd=folder)


def unwritable_case(tool: str, folder: Path) -> dict:
    """The recipe on class folders (``DATA_ROOT``) with its work dir under
    a file, ``folder / 'a_file'`` (for tools/test.py an empty checkpoint
    file, which nothing reads before this answer)."""
    root = write_class_folders(folder / 'data', ('cat', 'dog', 'fox'), 1)
    (folder / 'a_file').write_text('')
    checkpoint = [folder / 'epoch_1.pth'] if tool == 'test' else []
    for path in checkpoint:
        path.write_bytes(b'')
    args = [LITE, *checkpoint, '--work-dir', folder / 'a_file' / 'work']
    return dict(
        tool=tool, args=args, cwd=folder, env=dict(DATA_ROOT=str(root))
    )


@pytest.fixture(scope='module')
def answers(tmp_path_factory) -> dict:
    """The cases of the tests below, each in a folder of its own, in one
    fresh interpreter: those answered before torch's import first, then
    the unwritable work dirs (mmengine's logger, which says an environment
    variable was used, imports torch), then those that need the models.
    The stderr, stdout and folder of each, by test and options."""
    first, then, last = {}, {}, {}
    for tool, table in (('train', TRAIN_ANSWERS), ('test', TEST_ANSWERS)):
        for options, _, _, models in table:
            folder = tmp_path_factory.mktemp(tool)
            case = tool_case(tool, options, folder)
            (last if models else first)[tool, tuple(options)] = case
    for tool in ('train', 'test'):
        folder = tmp_path_factory.mktemp(f'unwritable_{tool}')
        then['unwritable', tool] = unwritable_case(tool, folder)
    cases = {**first, **then, **last}
    results = answers_before_models(list(cases.values()))
    return {
        key: (*result, case['cwd'])
        for (key, case), result in zip(cases.items(), results)
    }


@pytest.mark.parametrize('options, code, message, models', TRAIN_ANSWERS)
def test_train_tool_answers_before_importing_the_models(
    options, code, message, models, answers
):
    stderr, stdout, folder = answers['train', tuple(options)]
    assert stderr == message
    assert stdout == [f'exit {code}', f'imported {models} {models} {models}']
    assert not (folder / 'work').exists()


@pytest.mark.parametrize('options, code, message, models', TEST_ANSWERS)
def test_test_tool_answers_before_importing_the_models(
    options, code, message, models, answers
):
    stderr, stdout, folder = answers['test', tuple(options)]
    assert stderr == message
    assert stdout == [f'exit {code}', f'imported {models} {models} {models}']
    assert not (folder / 'work').exists()


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_class_count_is_answered_before_the_first_step(
    tool, tmp_path, monkeypatch
):
    # RunCheckHook, as the datasets are built: nothing left behind
    root = write_class_folders(tmp_path / 'data', ('cat', 'dog'), 1)
    key = 'test_dataloader' if tool == 'test' else 'train_dataloader'
    folder = 'val' if tool == 'test' else 'train'
    checkpoint = []
    if tool == 'test':
        checkpoint = [tmp_path / 'model.pth']
        model = MODELS.build(load_config(LITE).model)
        torch.save(dict(state_dict=model.state_dict()), checkpoint[0])
    monkeypatch.setenv('DATA_ROOT', str(root))  # the recipe reads it
    result = run_main(
        tool, LITE, *checkpoint, '--work-dir', tmp_path / 'work',
    )  # fmt: skip
    assert result.returncode == 1
    assert one_line(result.stderr) == (
        f'{key}: the dataset has 2 classes in {root}/{folder} (cat, dog), '
        'but model.head.num_classes=3; set NUM_CLASSES=2, or give the '
        'dataset 3 class folders.'
    )
    assert not (tmp_path / 'work').exists()


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_unwritable_work_dir_is_answered_before_importing_the_models(
    tool, answers
):
    stderr, stdout, folder = answers['unwritable', tool]
    blocker = folder / 'a_file'
    assert stderr == (
        f'--work-dir {blocker / "work"}: {blocker} is a file, not a folder.'
    )
    assert stdout[-2:] == ['exit 1', 'imported False False True']


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


@pytest.mark.parametrize(
    'tool, args',
    [
        ('train', [LITE, '--work-dir', 'work']),
        ('test', [LITE, 'epoch_1.pth', '--work-dir', 'work']),
        ('infer', ['a.png', LITE, 'epoch_1.pth']),
        ('analysis_tools/get_flops', [LITE]),
    ],
)
def test_a_value_whose_spaces_mmengine_would_delete_is_refused(
    tool, args, tmp_path, monkeypatch
):
    """mmengine's DictAction makes data/my set data/myset: one line, exit
    code 2, nothing written; spaces beside brackets and commas, which
    change nothing, are taken."""
    monkeypatch.chdir(tmp_path)
    result = run_main(tool, *args, '--cfg-options', 'data_root=data/my set')
    prog = Path(tool).name
    assert result.returncode == 2
    assert result.stderr == (
        f'{prog}.py: error: --cfg-options data_root: mmengine deletes the '
        "spaces of 'data/my set', which would become 'data/myset'; set "
        'such a value in the config file, or in the environment variable '
        'the config reads it from.\n'
    )
    assert list(tmp_path.iterdir()) == []
    # a value mmengine cannot parse: argparse's usage error, no traceback
    result = run_main(tool, *args, '--cfg-options', 'x=[1,2')
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f'{prog}.py: error: cannot parse the --cfg-options values; write '
        'lists as key=[a,b] and give dicts in a config file'
    )
    assert list(tmp_path.iterdir()) == []
    parsed = load_tool(f'tools/{tool}.py').parse_args(
        [*args, '--cfg-options', 'val_evaluator.topk=(1, 2)', 'x=[a, [b]]']
    )
    assert parsed.cfg_options == {
        'val_evaluator.topk': (1, 2),
        'x': ['a', ['b']],
    }


def test_a_new_style_configs_classes_are_judged_by_their_arguments(tmp_path):
    """A config of read_base() names its classes themselves: the option is
    merged as mmengine merges it, and a key the class does not take is
    answered from the class (the Runner's check)."""
    (tmp_path / 'base.py').write_text(
        'from torch.optim import SGD\n'
        'optim_wrapper = dict(optimizer=dict(type=SGD, lr=0.1))\n'
    )
    (tmp_path / 'mine.py').write_text(
        'from mmengine.config import read_base\n\n'
        'with read_base():\n'
        '    from .base import *\n\n'
        'from torch.optim import AdamW\n\n'
        'optim_wrapper.optimizer.update(type=AdamW, lr=0.01)\n'
    )
    config = tmp_path / 'mine.py'
    cfg = load_config(config, {'optim_wrapper.optimizer.weight_decay': 0.1})
    expected = Config.fromfile(config)
    expected.merge_from_dict({'optim_wrapper.optimizer.weight_decay': 0.1})
    assert cfg.to_dict() == expected.to_dict()
    check_config(cfg)  # no ConfigError
    cfg = load_config(config, {'optim_wrapper.optimizer.lrr': 0.1})
    with pytest.raises(ConfigError) as caught:
        check_config(cfg)
    assert str(caught.value) == (
        "optim_wrapper.optimizer.lrr: AdamW takes no argument 'lrr'; did "
        "you mean 'lr'?"
    )

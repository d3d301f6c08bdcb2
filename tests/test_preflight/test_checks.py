"""Every mistake a config can answer, answered by the pre-flight before
the models are imported (a real process: the point is the import not
happening), with no work dir left; the same line through a Runner built
as OpenMMLab's tools build it; each check made once per run."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.registry import RUNNERS
from mmpretrain.registry import MODELS

import t2t_preflight.checks
from t2t_plugin.models.backbones import T2TViT
from t2t_plugin.runtime import CheckpointError, read_checkpoint
from t2t_preflight import archs, load_config
from t2t_preflight.inputs import built_datasets, class_folder_problem

from ..helpers import (
    ROOT,
    answer_before_models,
    as_dict,
    door,
    last_line,
    one_line,
    run_main,
    run_mmpretrain_tool,
    tool_env,
    write_class_folders,
)

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
ARCHS = '7, 10, 12, 14, 19, 24, 14-wide, 14-resnext, t-14, t-19, t-24'


def test_the_light_package_imports_neither_the_plugin_nor_torch():
    code = (
        'import sys, t2t_preflight.arguments, t2t_preflight.checks; '
        "print('t2t_plugin' in sys.modules, 'torch' in sys.modules, "
        "'mmpretrain' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, '-c', code],
        env=tool_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ['False', 'False', 'False']


def test_the_plugin_uses_the_light_modules_themselves():
    import t2t_plugin.runtime

    assert t2t_plugin.runtime.load_config is load_config
    assert T2TViT.arch_zoo is archs.ARCH_ZOO
    assert T2TViT.arch_names is archs.arch_names
    # the backbone adds the option checks of a custom arch's numbers only
    for name in [*archs.arch_names(), 'T2T-ViT-14@384', 7]:
        assert T2TViT.resolve_arch(name) == archs.resolve_arch(name)
    with pytest.raises(ValueError) as light:
        archs.resolve_arch('t-15')
    with pytest.raises(ValueError) as built:
        T2TViT.resolve_arch('t-15')
    assert str(built.value) == str(light.value)


@pytest.mark.parametrize(
    'options, code, message',
    [
        (['model.backbone.arch=t-15'], 1,
         "model.backbone.arch: Unknown T2T-ViT arch 't-15'; choose one of "
         f'{ARCHS} (also as t2t-vit-NAME, any case, NAME@384 at 384 px) or '
         'pass a dict.'),
        (['lr=0.1'], 2,
         f"Invalid options for {LITE}: --cfg-options lr: the config has no "
         "key 'lr'; it is set as optim_wrapper.optimizer.lr: give the full "
         'key.'),
        (['batch_size=8'], 2,
         f'Invalid options for {LITE}: --cfg-options batch_size: the config '
         "has no key 'batch_size'; it is set as train_dataloader.batch_size, "
         'val_dataloader.batch_size, test_dataloader.batch_size: give the '
         'full key.'),
        (['WARMUP_EPOCHS=20'], 1,
         'param_scheduler.1: the CosineAnnealingLR begins at epoch 20 and '
         'ends at epoch 12 (train_cfg.max_epochs=12); WARMUP_EPOCHS=20 must '
         'be below MAX_EPOCHS=12 (a warm-up must be shorter than '
         'training).'),
        (['val_evaluator.topk=(1,5)'], 1,
         'val_evaluator.topk=(1, 5) asks for top-5, but '
         'model.head.num_classes=3; set val_evaluator.topk=(1,) (a top-k '
         'needs k classes or more).'),
        (['load_from=missing.pth'], 1,
         'Checkpoint not found: expected missing.pth (see '
         'docs/training.md#training).'),
    ],
)  # fmt: skip
def test_config_mistakes_are_answered_before_the_models(
    options, code, message, tmp_path, monkeypatch
):
    root = write_class_folders(tmp_path / 'data', 3)
    env = [option for option in options if option.isupper()]
    for name, _, value in (option.partition('=') for option in env):
        monkeypatch.setenv(name, value)
    options = [option for option in options if option not in env]
    stderr, stdout = answer_before_models(
        'train', LITE, '--work-dir', tmp_path / 'work', '--cfg-options',
        *loader_root(root), *options, cwd=tmp_path,
    )  # fmt: skip
    assert stderr == message
    # mmengine's logger, which says an environment variable was used,
    # imports torch
    assert stdout[-2:] == [f'exit {code}', f'imported False False {bool(env)}']
    assert not (tmp_path / 'work').exists()
    if code == 1:
        # the Runner of the config's runner_type (mmpretrain's tools merge
        # options into the loaded config: the keys, not the variables)
        with pytest.raises(t2t_preflight.ConfigError) as error:
            door(LITE, as_dict([*loader_root(root), *options]),
                 tmp_path / 'door', build=RUNNERS.build)  # fmt: skip
        assert str(error.value) == message
        assert not (tmp_path / 'door').exists()


def test_missing_files_and_configs_are_answered_before_the_models(tmp_path):
    root = write_class_folders(tmp_path / 'data', 3)
    work = ['--work-dir', tmp_path / 'work']
    data = ['--cfg-options', *loader_root(root)]
    expected = (
        'Checkpoint not found: expected missing.pth (see '
        'docs/training.md#training).'
    )
    for tool, args in (
        ('train', [LITE, '--resume', 'missing.pth', *work, *data]),
        ('test', [LITE, 'missing.pth', *work, *data]),
    ):
        stderr, stdout = answer_before_models(tool, *args, cwd=tmp_path)
        assert stderr == expected
        assert stdout == ['exit 1', 'imported False False False']
    typo = LITE.replace('32px', '32p')
    stderr, stdout = answer_before_models('train', typo, cwd=tmp_path)
    assert stderr == f'Config file not found: {typo}; did you mean {LITE}?'
    assert stdout == ['exit 2', 'imported False False False']
    assert not (tmp_path / 'work').exists()


# The tools that only run a model: their arguments (the checkpoint an
# empty file where it is not the mistake), the start of their error line
# and their exit code.
RUN_ONLY = {
    'infer': (['{image}', '{config}', '{ckpt}'], 'error: ', 1),
    'deployment/pytorch2onnx': (
        ['{config}', '{ckpt}', '{out}/model.onnx'],
        'pytorch2onnx.py: error: ',
        2,
    ),
    'visualization/vis_attention': (
        ['{image}', '{config}', '{ckpt}', '--out-dir', '{out}'],
        'error: ',
        1,
    ),
    'visualization/vis_features': (
        ['{image}', '{config}', '{ckpt}', '--out-dir', '{out}'],
        'error: ',
        1,
    ),
    'analysis_tools/get_flops': (['{config}'], 'error: ', 1),
    'analysis_tools/benchmark': (
        ['{config}', '--json', '{out}/rows.json'],
        'benchmark.py: error: ',
        1,
    ),
}


@pytest.mark.parametrize('tool', sorted(RUN_ONLY))
@pytest.mark.parametrize('mistake', ['arch', 'config path', 'checkpoint'])
def test_run_only_tools_answer_before_the_models(tmp_path, tool, mistake):
    """An unknown arch, a config path typo, a checkpoint that is not
    there: one line before torch, mmpretrain's models or t2t_plugin are
    imported, and nothing written."""
    args, start, code = RUN_ONLY[tool]
    if mistake == 'checkpoint' and '{ckpt}' not in args:
        pytest.skip('the tool reads no checkpoint')
    image = tmp_path / 'a.png'
    image.write_bytes(b'')
    empty = tmp_path / 'empty.pth'
    empty.touch()
    config, ckpt, options = LITE, empty, []
    if mistake == 'arch':
        options = ['--cfg-options', 'model.backbone.arch=t-15']
        line = "model.backbone.arch: Unknown T2T-ViT arch 't-15'; choose "
        line += f'one of {ARCHS} (also as t2t-vit-NAME, any case, NAME@384 '
        line += 'at 384 px) or pass a dict.'
    elif mistake == 'config path':
        config = LITE.replace('32px', '32p')
        line = f'Config file not found: {config}; did you mean {LITE}?'
    else:
        ckpt = tmp_path / 'missing.pth'
        line = (
            f'Checkpoint not found: expected {ckpt} (see '
            'docs/training.md#training).'
        )
    out = tmp_path / 'out'
    argv = [
        arg.format(image=image, config=config, ckpt=ckpt, out=out)
        for arg in args
    ]
    stderr, stdout = answer_before_models(tool, *argv, *options, cwd=tmp_path)
    assert stderr == start + line
    assert stdout == [f'exit {code}', 'imported False False False']
    assert not out.exists()


@pytest.mark.parametrize(
    'option, message',
    [
        ('optim_wrapper.optimizer.lrr=0.1',
         "optim_wrapper.optimizer.lrr: AdamW takes no argument 'lrr'; did "
         "you mean 'lr'?"),
        # a key its dict does not hold: the class's arguments
        ('param_scheduler.1.T_mx=5',
         "param_scheduler.1.T_mx: CosineAnnealingLR takes no argument "
         "'T_mx'; did you mean 'T_max'?"),
        ('train_dataloader.dataset.with_labels=True',
         'train_dataloader.dataset.with_labels: CustomDataset takes no '
         "argument 'with_labels'; did you mean 'with_label'?"),
    ],
)  # fmt: skip
def test_a_key_its_class_does_not_take_is_answered_after_the_import(
    option, message, tmp_path
):
    """From the class the registry builds (after the models' import),
    before a work dir is made: our train tool, and the Runner of the
    config's runner_type as mmpretrain's tools build it."""
    root = write_class_folders(tmp_path / 'data', 3)
    options = [*loader_root(root), option]
    result = run_main(
        'train', LITE, '--work-dir', tmp_path / 'work',
        '--cfg-options', *options,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (1, f'{message}\n')
    with pytest.raises(t2t_preflight.ConfigError) as error:
        door(LITE, as_dict(options), tmp_path / 'door', build=RUNNERS.build)
    assert str(error.value) == message
    assert not (tmp_path / 'work').exists()
    assert not (tmp_path / 'door').exists()


# A user's AdamW, registered over the stock name, with an argument of its
# own and the others passed on to torch's
OWN_ADAMW = """
import torch
from mmpretrain.registry import OPTIMIZERS


@OPTIMIZERS.register_module(name='AdamW', force=True)
class FlaggedAdamW(torch.optim.AdamW):
    def __init__(self, params, flag=0.0, **kwargs):
        super().__init__(params, **kwargs)
        self.flag = flag
"""


@pytest.mark.parametrize(
    'option, message',
    [
        ('optim_wrapper.optimizer.flag=0.5', None),
        ('optim_wrapper.optimizer.lrr=0.1',
         "optim_wrapper.optimizer.lrr: FlaggedAdamW takes no argument "
         "'lrr'; did you mean 'lr'?"),
    ],
)  # fmt: skip
def test_a_class_registered_over_a_stock_name_is_judged_by_its_arguments(
    option, message, tmp_path, monkeypatch
):
    """The class the registry builds, after the config's custom_imports:
    its own argument is taken, a misspelt one it passes on to torch's
    AdamW is answered; our train tool and mmpretrain's."""
    from mmpretrain.registry import OPTIMIZERS

    from ..test_tools.test_config_overrides import runner_configs

    # the stock AdamW (torch's, from mmengine's registry) comes back after
    monkeypatch.setitem(OPTIMIZERS._module_dict, 'AdamW', None)
    module = f'own_adamw_{tmp_path.name}'
    (tmp_path / f'{module}.py').write_text(OWN_ADAMW)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / 'mine.py'
    config.write_text(
        f'_base_ = [{LITE!r}]\n'
        f"custom_imports = dict(imports=['t2t_plugin', {module!r}])\n"
    )
    root = write_class_folders(tmp_path / 'data', 3)
    options = ['--cfg-options', *loader_root(root), option]
    kept = runner_configs(monkeypatch)
    ours = run_main('train', config, '--work-dir', tmp_path / 'a', *options)
    theirs = run_mmpretrain_tool(
        'train', config, '--work-dir', tmp_path / 'b', *options
    )
    assert OPTIMIZERS.get('AdamW').__name__ == 'FlaggedAdamW'
    if message is None:
        assert len(kept) == 2  # both reached the Runner
    else:
        assert not kept
        assert (ours.returncode, ours.stderr) == (1, f'{message}\n')
        assert last_line(theirs.stderr).endswith(f'ConfigError: {message}')


def test_one_class_folder_is_refused_before_the_first_step(tmp_path):
    root = write_class_folders(tmp_path / 'data', 1)
    expected = (
        f'train_dataloader: the dataset has 1 class in {root}/train '
        '(c0); a classifier needs at least two, one folder of images each.'
    )
    ours = run_main(
        'train', LITE, '--work-dir', tmp_path / 'work', '--cfg-options',
        *loader_root(root),
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    assert not (tmp_path / 'work').exists()
    # mmengine's own Runner: the run's hook says the same
    options = as_dict(loader_root(root))
    assert str(door(LITE, options, tmp_path / 'door')) == expected
    # our tools ask before the Runner only for a run that has the hook
    cfg = load_config(LITE, options)
    built = built_datasets(cfg, ['train_dataloader'])
    assert class_folder_problem(cfg, built) == expected
    cfg.default_hooks.pop('run_check')
    assert class_folder_problem(cfg, built) is None
    # the hook is known by its class (checks_class_folders), not its name
    from mmengine.registry import HOOKS

    from t2t_plugin.runtime.hooks import RunCheckHook

    name = f'FolderCheck_{tmp_path.name}'
    HOOKS.register_module(name=name, module=type(name, (RunCheckHook,), {}))
    cfg.custom_hooks = [dict(type=name)]
    assert class_folder_problem(cfg, built) == expected


def loader_root(root: Path) -> list:
    """Every loader's ``data_root`` (the recipe's ``DATA_ROOT`` sets them
    too, but its logger imports torch)."""
    return [
        f'{loader}.dataset.data_root={root}'
        for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')
    ]


def quick(env, root: Path, *extra: str) -> list:
    """``--cfg-options`` of one tiny epoch of the small-image recipe, its
    environment variables set with the monkeypatch ``env``."""
    env.setenv('MAX_EPOCHS', '1')
    env.setenv('WARMUP_EPOCHS', '0')
    return [*loader_root(root), 'train_dataloader.batch_size=2', *extra]


def test_no_warm_up_on_a_quick_subset_trains(tmp_path, monkeypatch):
    root = write_class_folders(tmp_path / 'data', 3)
    # the first 2 of 6 samples: one class of three, which is no empty folder
    result = run_main(
        'train', LITE, '--work-dir', tmp_path / 'work', '--cfg-options',
        *quick(monkeypatch, root, 'train_dataloader.dataset.indices=2'),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    log = next((tmp_path / 'work').glob('*/*.log')).read_text()
    assert 'param_scheduler.0: the LinearLR begins where it ends (0); left ' \
        'out.' in log  # fmt: skip
    assert (tmp_path / 'work' / 'epoch_1.pth').is_file()


@pytest.mark.parametrize(
    'option, message',
    [
        ('model.backbone.attn_init.type=foo', "Unknown attn_init {'type': "),
        ('train_dataloader.batch_size=0', 'batch_size should be a positive'),
        ('optim_wrapper.optimizer.lr=abc', 'optim_wrapper: TypeError'),
    ],
)
def test_a_run_that_stops_before_its_first_step_leaves_no_work_dir(
    option, message, tmp_path, monkeypatch
):
    root = write_class_folders(tmp_path / 'data', 3)
    result = run_main(
        'train', LITE, '--work-dir', tmp_path / 'work', '--cfg-options',
        *quick(monkeypatch, root, option),
    )  # fmt: skip
    assert result.returncode == 1
    assert message in one_line(result.stderr)
    assert not (tmp_path / 'work').exists()
    # built as mmpretrain's tools build it
    options = as_dict(loader_root(root) + [option])
    try:  # the model is built with the Runner, the loader as it trains
        error = door(LITE, options, tmp_path / 'door', build=RUNNERS.build)
    except ValueError as raised:
        error = raised
    assert message in str(error)
    assert not (tmp_path / 'door').exists()


def test_every_door_asks_the_config_checks(tmp_path, monkeypatch):
    """Nothing is handed on: our tools' pre-flight and the runner each ask
    ``config_problem``, and mmengine's Runner does through the runner."""
    calls = []
    config_problem = t2t_preflight.checks.config_problem

    def counted(*args, **kwargs):
        calls.append(args)
        return config_problem(*args, **kwargs)

    monkeypatch.setattr(t2t_preflight.checks, 'config_problem', counted)
    root = write_class_folders(tmp_path / 'data', 3)
    # stops as the model is built, after the runner's own checks
    option = 'model.backbone.attn_init.type=foo'
    result = run_main(
        'train', LITE, '--work-dir', tmp_path / 'work', '--cfg-options',
        *quick(monkeypatch, root, option),
    )  # fmt: skip
    assert result.returncode == 1 and len(calls) == 2
    options = as_dict(loader_root(root) + [option])
    with pytest.raises(ValueError, match='Unknown attn_init'):
        door(LITE, options, tmp_path / 'door', build=RUNNERS.build)
    assert len(calls) == 3


def test_a_missing_checkpoint_is_one_line_through_every_door(tmp_path):
    missing = tmp_path / 'missing.pth'
    expected = (
        f'Checkpoint not found: expected {missing} (see '
        'docs/training.md#training).'
    )
    root = write_class_folders(tmp_path / 'data', 3)
    ours = run_main(
        'test', LITE, missing, '--work-dir', tmp_path / 'work',
        '--cfg-options', *loader_root(root),
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    # mmengine's own Runner: RunCheckHook
    error = door(LITE, as_dict(loader_root(root)), tmp_path / 'door', 'test')
    assert error is None  # no checkpoint: nothing to judge
    options = as_dict([*loader_root(root), f'load_from={missing}'])
    error = door(LITE, options, tmp_path / 'door', 'test')
    assert str(error) == expected
    # the reader, for get_model, init_cfg and every loader
    with pytest.raises(CheckpointError) as raised:
        read_checkpoint(missing)
    assert str(raised.value) == expected


def test_a_variable_of_a_base_config_is_merged_as_mmengine_does(tmp_path):
    """--cfg-options max_epochs=3 on a config built on the recipe: the
    top-level value only (as mmpretrain's tools merge it), one warning
    line naming the keys and MAX_EPOCHS, and the run goes on."""
    base = (
        Path(LITE)
        .read_text()
        .replace(
            "'./_base_/default_runtime.py'",
            repr(str(ROOT / 'configs' / '_base_' / 'default_runtime.py')),
        )
    )
    (tmp_path / 'base.py').write_text(base)
    config = tmp_path / 'mine.py'
    config.write_text("_base_ = ['base.py']\n")
    cfg = load_config(config, {'max_epochs': 3})
    assert (cfg.max_epochs, cfg.train_cfg.max_epochs) == (3, 12)
    result = run_main('train', config, '--cfg-options', 'max_epochs=3')
    assert result.returncode == 1  # no data: the run went on to it
    warned = [line for line in result.stdout.splitlines() if 'sets' in line]
    assert len(warned) == 1
    assert warned[0].endswith(
        '--cfg-options max_epochs=3 sets max_epochs only: '
        'train_cfg.max_epochs keep 12, which the file set from max_epochs '
        'when it was read; set MAX_EPOCHS=3 in the environment instead (the '
        'config reads max_epochs from it), or set those keys.'
    )
    assert one_line(result.stderr).startswith('Dataset not found')


def test_the_hook_checks_the_checkpoint_through_every_door(
    tmp_path, monkeypatch
):
    from t2t_plugin.runtime.hooks import run_check_hook

    judged = []
    for module, name in ((run_check_hook, 'checkpoint_problem'),):
        original = getattr(module, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            judged.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    root = write_class_folders(tmp_path / 'data', 3)
    checkpoint = tmp_path / 'model.pth'
    model = MODELS.build(load_config(LITE).model)
    meta = dict(dataset_meta=dict(classes=('c0', 'c1', 'c2')))
    torch.save(dict(state_dict=model.state_dict(), meta=meta), checkpoint)
    ours = run_main(
        'test', LITE, checkpoint, '--work-dir', tmp_path / 'work',
        '--cfg-options', *loader_root(root),
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert 'accuracy/top1: ' in ours.stdout
    assert judged == ['checkpoint_problem']
    # mmengine's own Runner: the hook judges it too
    options = as_dict([*loader_root(root), f'load_from={checkpoint}'])
    assert door(LITE, options, tmp_path / 'door', 'test') is None
    assert judged == ['checkpoint_problem'] * 2

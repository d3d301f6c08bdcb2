"""The package as pip builds and installs it: a wheel holds real copies of
the configs and tools and requires neither family of OpenMMLab
distributions (the ``openmmlab`` and ``onedl`` extras bring one), the
build leaves the source tree as it was, and ``import t2t_plugin`` without
a family says in one line what to install."""

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .helpers import ROOT, tool_env

OPENMMLAB = {'mmengine', 'mmpretrain', 'mmcv-lite', 'mmcv'}
ONEDL = {'onedl-mmengine', 'onedl-mmpretrain', 'onedl-mmcv'}
# What a checkout holds that is no part of a build.
NOT_SOURCES = shutil.ignore_patterns(
    '.git', '.venv*', '.gpu-wheels', 'work_dirs', 'build', 'dist',
    '*.egg-info', '__pycache__', '.pytest_cache', '.ruff_cache', '.mim',
)  # fmt: skip


@pytest.fixture(scope='module')
def built(tmp_path_factory) -> tuple:
    """A copy of the checkout and the wheel pip builds from it."""
    root = tmp_path_factory.mktemp('packaging')
    source = root / 'source'
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    subprocess.run(
        [
            sys.executable,
            '-m',
            'pip',
            'wheel',
            '--no-deps',
            '--no-build-isolation',
            '-q',
            '-w',
            str(root / 'dist'),
            str(source),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = (root / 'dist').glob('*.whl')
    return source, wheel


def requirements(wheel: Path) -> dict:
    """The wheel's requirement names, by extra ('' for the required)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith('METADATA')]
        text = archive.read(name).decode()
    by_extra = {}
    for line in text.splitlines():
        if not line.startswith('Requires-Dist: '):
            continue
        requirement = Requirement(line.removeprefix('Requires-Dist: '))
        extra = ''
        if requirement.marker:
            marker = str(requirement.marker)
            extra = marker.split('extra == ')[1].strip('"\'')
        by_extra.setdefault(extra, set()).add(requirement.name.lower())
    return by_extra


@pytest.mark.slow
def test_wheel_holds_copies_and_leaves_the_source_alone(built):
    source, wheel = built
    assert not (source / 't2t_plugin' / '.mim').exists()
    with zipfile.ZipFile(wheel) as archive:
        for name in (
            'model-index.yml',
            'configs/t2t-vit-7_8xb64_in1k.py',
            'configs/_base_/default_runtime.py',
            'tools/train.py',
            'tools/slurm_train.sh',
        ):
            copy = archive.read(f't2t_plugin/.mim/{name}')
            assert copy == (source / name).read_bytes(), name
        assert not [n for n in archive.namelist() if '__pycache__' in n]


@pytest.mark.slow
def test_installed_wheel_finds_configs_by_name(built, tmp_path):
    """The wheel installed alone: mmpretrain's get_model finds the config
    of a model-index name in the installed package's .mim copies."""
    site = tmp_path / 'site'
    subprocess.run(
        [
            sys.executable,
            '-m',
            'pip',
            'install',
            '-q',
            '--no-deps',
            '--target',
            str(site),
            str(built[1]),
        ],
        check=True,
        timeout=300,
    )
    code = (
        'import t2t_plugin, mmpretrain; '
        "m = mmpretrain.get_model('t2t-vit-t-14_8xb64_in1k_t2tp'); "
        'print(t2t_plugin.__file__); print(m._config.filename)'
    )
    done = subprocess.run(
        [sys.executable, '-c', code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(site)),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    module, config = done.stdout.strip().splitlines()[-2:]
    assert module.startswith(str(site))
    assert config == str(
        site / 't2t_plugin/.mim/configs/t2t-vit-t-14_8xb64_in1k.py'
    )


@pytest.mark.slow
def test_wheel_requires_neither_family(built):
    by_extra = requirements(built[1])
    assert not by_extra[''] & (OPENMMLAB | ONEDL)
    assert {'torch', 'torchvision'} <= by_extra['']
    assert by_extra['openmmlab'] & (OPENMMLAB | ONEDL) == {
        'mmengine',
        'mmpretrain',
        'mmcv-lite',
    }
    assert by_extra['onedl'] & (OPENMMLAB | ONEDL) == ONEDL
    assert not by_extra['dense'] & ONEDL


@pytest.mark.slow
def test_import_without_a_family_names_the_extras(built, tmp_path):
    """A bare environment: pip's wheel with no dependencies."""
    environment = tmp_path / 'bare'
    venv.create(environment, with_pip=False)
    python = environment / 'bin' / 'python'
    subprocess.run(
        [
            sys.executable,
            '-m',
            'pip',
            '--python',
            str(python),
            'install',
            '-q',
            '--no-index',
            '--no-deps',
            str(built[1]),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    done = subprocess.run(
        [str(python), '-c', 'import t2t_plugin'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        'ImportError: t2t_plugin needs mmengine, mmcv, mmpretrain: pip '
        'install "t2t-plugin[openmmlab]" (OpenMMLab 2.x) or '
        '"t2t-plugin[onedl]" (the onedl-* continuation); see '
        'docs/install.md.'
    )


def test_one_family_is_installed():
    """Two distributions writing one package would leave whichever pip
    installed last: each test environment holds one family."""
    installed = {
        dist.metadata['Name'].lower() for dist in metadata.distributions()
    }
    families = [
        family
        for family in ({'mmengine', 'mmpretrain'}, ONEDL - {'onedl-mmcv'})
        if family & installed
    ]
    assert len(families) == 1, sorted(installed & (OPENMMLAB | ONEDL))
    assert len(installed & {'mmcv', 'mmcv-lite', 'onedl-mmcv'}) == 1


def installed_mim() -> str:
    """'openmim', 'onedl-mim' or '' (none)."""
    for name in ('openmim', 'onedl-mim'):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    return ''


DEMO_CONFIG = ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'
needs_mim = pytest.mark.skipif(
    not installed_mim(),
    reason='no mim (make install-tests installs openmim, make test-onedl '
    'onedl-mim)',
)


def run_mim(command: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    """``mim COMMAND t2t-plugin CONFIG ARGS`` as a user runs it.

    openmim 0.3.9 (develop mode, ``make install``) finds the config by
    name; onedl-mim 0.5.1 (PEP 660) is given its path.
    """
    by_name = installed_mim() == 'openmim'
    return subprocess.run(
        [
            str(Path(sys.executable).parent / 'mim'),
            command,
            't2t-plugin',
            DEMO_CONFIG.name if by_name else str(DEMO_CONFIG),
            *map(str, args),
        ],
        cwd=cwd,
        # as a user runs it: the checkout on PYTHONPATH would show mim the
        # checkout's egg-info instead of the installed metadata
        env={k: v for k, v in tool_env().items() if k != 'PYTHONPATH'},
        capture_output=True,
        text=True,
        timeout=600,
    )


def accuracies(text: str) -> list[tuple[float, float]]:
    """The (top-1, top-5) accuracy of each evaluation in a log."""
    return [
        (float(top1), float(top5))
        for top1, top5 in re.findall(
            r'accuracy/top1: ([\d.]+)\s+accuracy/top5: ([\d.]+)', text
        )
    ]


@pytest.fixture(scope='module')
def mim_trained(tmp_path_factory) -> tuple:
    """One short epoch of the demo through ``mim train``: its work dir and
    the finished process."""
    root = tmp_path_factory.mktemp('mim')
    done = run_mim(
        'train',
        '--work-dir',
        root / 'work',
        '--cfg-options',
        'train_cfg.max_epochs=1',
        'train_cfg.val_interval=1',
        'train_dataloader.dataset.indices=64',
        cwd=root,
    )
    return root, done


@pytest.mark.slow
@pytest.mark.mim
@needs_mim
def test_mim_train_runs_the_checkouts_tools(mim_trained):
    """``mim train t2t-plugin CONFIG`` on an editable install runs our
    tools/train.py on the checkout's config."""
    root, done = mim_trained
    log = (done.stdout + done.stderr).replace('\n', ' ')
    assert done.returncode == 0, log[-3000:]
    if installed_mim() == 'openmim':
        assert f'will use {DEMO_CONFIG} instead' in log
    assert f'{ROOT / "tools" / "train.py"} {DEMO_CONFIG}' in log or (
        f'{ROOT / "t2t_plugin" / ".mim" / "tools" / "train.py"} '
        f'{DEMO_CONFIG}' in log
    )
    assert (root / 'work' / 'epoch_1.pth').is_file()


@pytest.mark.slow
@pytest.mark.mim
@needs_mim
def test_mim_test_scores_the_checkpoint_as_training_did(mim_trained):
    root, trained = mim_trained
    assert trained.returncode == 0, trained.stderr[-3000:]
    done = run_mim(
        'test',
        '--checkpoint',
        root / 'work' / 'epoch_1.pth',
        '--work-dir',
        root / 'test',
        cwd=root,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    # the same weights on the same validation images: the same numbers as
    # the run's own evaluation after its epoch
    (val,) = accuracies(trained.stdout)
    # the tool's summary lines, once (the test loop's log line goes to
    # the log file only)
    assert accuracies(done.stdout) == [val]
    top1, top5 = val
    assert 0 < top1 <= top5 <= 100
    lines = done.stdout.splitlines()
    assert f'accuracy/top1: {top1:.4f}' in lines
    assert f'accuracy/top5: {top5:.4f}' in lines


@pytest.mark.slow
@pytest.mark.mim
@needs_mim
def test_mim_test_refuses_a_diverged_checkpoint_in_our_line(mim_trained):
    import torch

    root, trained = mim_trained
    assert trained.returncode == 0, trained.stderr[-3000:]
    checkpoint = torch.load(root / 'work' / 'epoch_1.pth', weights_only=False)
    checkpoint['state_dict']['backbone.norm.weight'][0] = float('nan')
    diverged = root / 'diverged.pth'
    torch.save({'state_dict': checkpoint['state_dict']}, diverged)
    done = run_mim(
        'test',
        '--checkpoint',
        diverged,
        '--work-dir',
        root / 'diverged',
        cwd=root,
    )
    assert done.returncode == 1
    assert 'accuracy/top1' not in done.stdout
    # openmim 0.3.9 runs the tool with subprocess.check_call and lets the
    # CalledProcessError escape: its own traceback follows the tool's
    # output, so ours is the last line before it
    ours, _, theirs = done.stderr.partition('Traceback (most recent call')
    assert ours.strip().splitlines()[-1] == (
        f'The checkpoint {diverged} holds NaN or infinite values in 1 '
        "weight(s) of T2TViT, e.g. 'backbone.norm.weight'; it comes from a "
        'run that diverged: take an earlier checkpoint.'
    )
    assert 'Traceback' not in ours
    if theirs:
        assert (
            theirs.strip()
            .splitlines()[-1]
            .startswith('subprocess.CalledProcessError: Command ')
        )

"""make demo in a virtual environment it did not create: used as it is
when it has what the demo imports (its pip freeze unchanged), else one
line naming what is missing and how to allow the installation; it
installs only with DEMO_INSTALL=1 or into the project's own .venv."""

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which('make') is None, reason='needs make'
)


def make(*args: str, venv: Path = None) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ('VIRTUAL_ENV', 'PYTHON', 'DEMO_INSTALL', 'MAKEFLAGS')
    }
    if venv is not None:
        env['VIRTUAL_ENV'] = str(venv)
        env['PATH'] = f'{venv / "bin"}{os.pathsep}{env["PATH"]}'
    return subprocess.run(
        ['make', '--no-print-directory', *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_venv(folder: Path, with_packages: bool) -> Path:
    """A virtual environment without pip; with the packages of the
    interpreter running the tests (a .pth file naming its site-packages)
    if ``with_packages``."""
    subprocess.run(
        [sys.executable, '-m', 'venv', '--without-pip', str(folder)],
        check=True,
        timeout=120,
    )
    if with_packages:
        purelib = subprocess.run(
            [str(folder / 'bin' / 'python'), '-c',
             'import sysconfig; print(sysconfig.get_path("purelib"))'],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        Path(purelib, 'test_packages.pth').write_text(
            '\n'.join(site.getsitepackages()) + '\n'
        )
    return folder


def freeze(venv: Path) -> str:
    return subprocess.run(
        [str(venv / 'bin' / 'python'), '-m', 'pip', 'freeze'],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def listing(venv: Path) -> list[str]:
    return sorted(str(path) for path in venv.rglob('*'))


def test_make_demo_uses_an_active_venv_as_it_is(tmp_path):
    venv = make_venv(tmp_path / 'venv', with_packages=True)
    planned = make('-n', 'demo', venv=venv)
    assert planned.returncode == 0, planned.stderr
    python = venv / 'bin' / 'python'
    assert planned.stdout.splitlines() == [
        f'Python: {python} (from the active virtual environment)',
        f'{python} tools/install/demo_env.py "the active virtual '
        f'environment ({python})"',
        f'{python} tools/demo.py',
    ]
    before, files = freeze(venv), listing(venv)
    checked = make('demo-env', venv=venv)  # the check itself, run
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == ''
    assert freeze(venv) == before
    assert 'torch==' in before
    assert listing(venv) == files


def test_make_demo_names_what_an_active_venv_lacks(tmp_path):
    venv = make_venv(tmp_path / 'venv', with_packages=False)
    files = listing(venv)
    result = make('demo', venv=venv)
    assert result.returncode != 0
    python = venv / 'bin' / 'python'
    assert result.stderr.splitlines()[0] == (
        f'the active virtual environment ({python}) lacks torch, '
        'torchvision, numpy, Pillow, matplotlib, scikit-learn, rich, '
        'mmengine, mmcv-lite, mmpretrain, and make demo installs only into '
        "the project's own .venv: pip install them there "
        '(docs/install.md), deactivate it to use .venv, or run make demo '
        "DEMO_INSTALL=1 to install make install's pinned versions into it."
    )
    assert 'tools/demo.py' not in result.stdout
    assert listing(venv) == files


def test_make_demo_installs_only_when_allowed(tmp_path):
    venv = tmp_path / 'venv'  # only planned: never made
    allowed = make('-n', 'demo', 'DEMO_INSTALL=1', venv=venv)
    assert allowed.returncode == 0, allowed.stderr
    assert 'torch==2.14.1' in allowed.stdout
    assert f'{venv}/bin/python -m pip install' in allowed.stdout

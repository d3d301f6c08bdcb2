"""tools/install/uv_install.py: ``uv pip install`` with the indexes,
find-links and constraints of pip's configuration."""

import os
import subprocess
import sys
import zipfile

import pytest

from ..helpers import ROOT, load_tool

uv_install = load_tool('tools/install/uv_install.py')
SCRIPT = ROOT / 'tools/install/uv_install.py'

LISTED = """global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'
global.find-links='/srv/global-wheels'
global.index-url='https://mirror.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/srv/env-wheels'
:env:.no-index='true'
user.constraint='/not/a/pip/install/section'
"""


@pytest.mark.parametrize('no_bytecode', ['1', ''])
def test_pip_settings_later_sections_override(no_bytecode, monkeypatch):
    """With PYTHONDONTWRITEBYTECODE set, uv writes the .pyc files, as pip
    does; without it the interpreter writes them when it imports."""
    monkeypatch.setenv('PYTHONDONTWRITEBYTECODE', no_bytecode)
    settings = uv_install.pip_settings(LISTED)
    assert settings == {
        'cert': '/etc/ssl/certs/ca-certificates.crt',
        'extra-index-url': 'file:///srv/a/simple file:///srv/b/simple',
        'find-links': '/srv/env-wheels',
        'index-url': 'https://install.example/simple',
        'no-index': 'true',
    }
    assert uv_install.uv_options(settings) == [
        '--index-strategy',
        'unsafe-best-match',
        *(['--compile-bytecode'] if no_bytecode else []),
        '--index-url',
        'https://install.example/simple',
        '--extra-index-url',
        'file:///srv/a/simple',
        '--extra-index-url',
        'file:///srv/b/simple',
        '--find-links',
        '/srv/env-wheels',
        '--no-index',
    ]


def probe_wheel(folder) -> None:
    """A wheel that exists only in ``folder``."""
    info = 't2t_uv_probe-1.0.dist-info'
    with zipfile.ZipFile(
        folder / 't2t_uv_probe-1.0-py3-none-any.whl', 'w'
    ) as wheel:
        wheel.writestr('t2t_uv_probe.py', '')
        wheel.writestr(
            f'{info}/METADATA',
            'Metadata-Version: 2.1\nName: t2t-uv-probe\nVersion: 1.0\n',
        )
        wheel.writestr(
            f'{info}/WHEEL',
            'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n'
            'Tag: py3-none-any\n',
        )
        wheel.writestr(f'{info}/RECORD', '')


def test_uv_resolves_from_the_find_links_of_pips_config_file(tmp_path):
    wheels = tmp_path / 'wheels'
    wheels.mkdir()
    probe_wheel(wheels)
    config = tmp_path / 'pip.conf'
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')}

    def dry_run(text: str) -> subprocess.CompletedProcess:
        config.write_text(text)
        return subprocess.run(
            [sys.executable, str(SCRIPT), '--dry-run', 't2t-uv-probe==1.0'],
            env=dict(env, PIP_CONFIG_FILE=str(config)),
            capture_output=True,
            text=True,
            timeout=120,
        )

    found = dry_run(f'[global]\nno-index = true\nfind-links = {wheels}\n')
    assert found.returncode == 0, found.stderr
    assert '+ t2t-uv-probe==1.0' in found.stderr
    missing = dry_run('[global]\nno-index = true\n')
    assert missing.returncode != 0
    assert 't2t-uv-probe' in missing.stderr

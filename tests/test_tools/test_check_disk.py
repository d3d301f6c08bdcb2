"""tools/install/check_disk.sh: the install steps refuse a full disk in one
line instead of failing halfway through a multi-GB pip install."""

import shutil
import subprocess

from ..helpers import ROOT

SCRIPT = ROOT / 'tools/install/check_disk.sh'


def check(path, need_gb):
    return subprocess.run(
        ['bash', str(SCRIPT), str(path), str(need_gb), 'the test environment'],
        capture_output=True,
        text=True,
    )


def test_more_than_the_free_space_is_refused_in_one_line(tmp_path):
    free_gb = shutil.disk_usage(tmp_path).free // 1024**3
    result = check(tmp_path / 'not' / 'made' / 'yet', free_gb + 1)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f'needs about {free_gb + 1} GB' in lines[0]
    # the nearest existing folder is the one measured (its free space may
    # move by a GB while the test runs)
    assert f'{tmp_path} has ' in lines[0]
    assert 'GB free' in lines[0]


def test_what_fits_passes_silently(tmp_path):
    result = check(tmp_path, 0)
    assert (result.returncode, result.stdout, result.stderr) == (0, '', '')

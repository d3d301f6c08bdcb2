""".dev_scripts/gpu_check.sh: the refusal without a GPU, and the whole check
in its CPU dry run (tiny models), which exercises every stage's wiring."""

import os
import re
import subprocess
import sys

import pytest
import torch

from tests.helpers import ROOT

SCRIPT = ROOT / '.dev_scripts/gpu_check.sh'


def run_check(*args, pythonpath=None):
    env = dict(os.environ, PYTHON=sys.executable)
    if pythonpath:
        env['PYTHONPATH'] = str(pythonpath)
    return subprocess.run(
        ['bash', str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here')
def test_without_a_gpu_the_real_check_refuses_in_one_line(tmp_path):
    run = run_check('--work-dir', str(tmp_path))
    assert run.returncode == 2
    assert run.stderr.strip().count('\n') == 0
    assert 'torch sees no CUDA device' in run.stderr
    assert '--dry-run' in run.stderr


def test_a_package_missing_one_of_its_needs_is_named(tmp_path):
    # an offline machine given mmpretrain without a library it imports
    fake = tmp_path / 'site' / 'mmpretrain'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text('import lazy_importer_not_carried\n')
    run = run_check('--dry-run', pythonpath=tmp_path / 'site')
    assert run.returncode == 2
    assert run.stderr.strip().count('\n') == 0
    assert 'mmpretrain cannot be imported' in run.stderr
    assert 'lazy_importer_not_carried' in run.stderr
    assert 'make gpu-wheels' in run.stderr


@pytest.mark.slow
def test_dry_run_runs_every_stage_and_prints_the_table(tmp_path):
    run = run_check('--dry-run', '--work-dir', str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    table = run.stdout
    assert (tmp_path / 'summary.md').read_text().strip() == table.strip()
    rows = [line for line in table.splitlines() if line.startswith('| ')]
    assert all(not line.endswith('| FAIL |') for line in rows)
    checks = [line.split(' | ')[0][2:] for line in rows[1:]]
    for arch in ('t-14', '14'):
        for mode in ('infer', 'train'):
            assert f'benchmark {arch} {mode} fp32 b2' in checks
        assert f'peak memory {arch} train fp32 b2' in checks
    # mmpretrain's T2T_ViT has transformer T2T layers only
    assert re.search(
        r'\| benchmark t-14 infer fp32 b2 \| .*x mmpretrain', table
    )
    compiled = '| torch.compile (eager) t-14 infer fp32 b2 | max rel. diff'
    assert f'{compiled} 0.0e+00' in table
    for arch in ('t-14', '14'):
        assert f'| train --amp {arch}, 3 iters b2 | 3/3 finite losses' in table
    assert '| dist_train.sh digits 1 (gloo) | gloo in log: True, top-1 ' in (
        table
    )
    assert re.search(
        r'^total \d+ s \(benchmark \d+ s, compile \d+ s, amp '
        r'\d+ s, dist \d+ s\)$',
        table,
        re.M,
    )

""".dev_scripts/first_second.py: every mistake of its table ends in one
line and a non-zero exit code, with no work dir left (the times are its
output, not checked here)."""

import re
import subprocess
import sys

from tests.helpers import ROOT


def test_every_mistake_is_one_line_without_a_work_dir():
    done = subprocess.run(
        [sys.executable, '.dev_scripts/first_second.py', '--repeat', '1'],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows = [
        line.split(' | ')
        for line in done.stdout.splitlines()[2:]
        if line.startswith('| ')
    ]
    # train.py 11, test.py 3; an arch of each of 6 run-only tools, and a
    # missing checkpoint of the 4 that read one
    assert len(rows) == 11 + 3 + 6 + 4
    for name, code, lines, left, seconds, line in rows:
        assert code in ('1', '2'), (name, line)
        assert (lines, left) == ('1', 'no'), (name, line)
        assert re.fullmatch(r'\d+\.\d\d', seconds)
    said = {row[0][2:]: row[5] for row in rows}
    assert "did you mean 'lr'?" in said['optimizer key']
    assert 'set NUM_CLASSES=10' in said['class folders against num_classes']
    assert (
        'WARMUP_EPOCHS=2 must be below MAX_EPOCHS=1'
        in (said['warm-up longer than training'])
    )
    assert 'optim_wrapper.optimizer.lr' in said['top-level lr=']
    assert (
        'did you mean configs/t2t-vit-lite_1xb64_custom-32px.py'
        in (said['config path typo'])
    )
    for tool in ('infer', 'pytorch2onnx', 'vis_attention', 'benchmark'):
        assert "Unknown T2T-ViT arch 't-15'" in said[f'{tool}.py: arch name']
    assert 'Checkpoint not found' in said['infer.py: missing checkpoint']

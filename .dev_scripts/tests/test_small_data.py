""".dev_scripts/small_data.py: the class folders it writes, a training of
the ResNet-18 reference per seed through tools/train.py, and the table's
row of the recorded top-1 values."""

import importlib.util
import json
import re

import numpy as np

from tests.helpers import ROOT

RECIPE = ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py'
REFERENCE = ROOT / '.dev_scripts/small_data/resnet-18_1xb64_custom-32px.py'


def load_script():
    spec = importlib.util.spec_from_file_location(
        'small_data', ROOT / '.dev_scripts/small_data.py'
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_fashion(path, per_class=2):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), per_class)
    np.savez(
        path,
        x_train=rng.integers(0, 255, (len(labels), 28, 28), np.uint8),
        y_train=labels,
        x_val=rng.integers(0, 255, (len(labels), 28, 28), np.uint8),
        y_val=labels,
        classes=np.array([f'class{i}' for i in range(10)]),
    )


def make_folders(script, tmp_path):
    """``folders`` of a generated fashion file; the folder it wrote."""
    write_fashion(tmp_path / 'fashion.npz')
    data = tmp_path / 'data'
    arguments = ['folders', '--out', str(data)]
    fashion = ['--fashion', str(tmp_path / 'fashion.npz')]
    assert script.main(arguments + fashion) == 0
    return data


def test_folders_train_and_table(tmp_path, capsys):
    script = load_script()
    data = make_folders(script, tmp_path)
    assert len(list((data / 'fashion' / 'train').glob('*/*.png'))) == 20
    assert sorted(p.name for p in (data / 'fashion' / 'val').iterdir()) == [
        f'class{i}' for i in range(10)
    ]
    # the digits' split of the DigitsDataset: 1,438 + 359 images
    assert len(list((data / 'digits' / 'train').glob('*/*.png'))) == 1438
    assert len(list((data / 'digits' / 'val').glob('*/*.png'))) == 359

    work_dir = tmp_path / 'runs'
    for config in (RECIPE, REFERENCE):
        assert (
            script.main(
                [
                    'train',
                    str(config),
                    '--data',
                    str(data / 'fashion'),
                    '--epochs',
                    '3',
                    '--seeds',
                    '0',
                    '--work-dir',
                    str(work_dir),
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    assert '--cfg-options model.head.num_classes=10' in out
    recorded = {}
    for config in (RECIPE, REFERENCE):
        run = work_dir / 'fashion' / f'{config.stem}_3e' / 'seed0'
        (scalars,) = run.glob('*/vis_data/scalars.json')
        records = [json.loads(line) for line in scalars.open()]
        # evaluated after epoch 3 only (val_interval 3), on all 20 images
        (top1,) = [r['accuracy/top1'] for r in records if 'accuracy/top1' in r]
        assert round(top1 / 5) * 5 == top1
        recorded[config.stem] = top1

    assert (
        script.main(
            [
                'table',
                str(RECIPE),
                str(REFERENCE),
                '--work-dir',
                str(work_dir),
                '--speed-rounds',
                '1',
                '--assets',
                str(tmp_path / 'assets'),
            ]
        )
        == 0
    )
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith('| fashion')
    ]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip('|').split('|')]
        name = cells[1].strip('`')
        top1 = recorded[name]
        assert cells[2] == '3'
        assert cells[3] == f'{top1:.1f}'
        assert cells[4] == f'{top1:.1f} - {top1:.1f}'
        params = float(cells[6].split()[0])
        assert params == (0.6 if 'lite' in name else 11.18)
        assert re.fullmatch(r'\d+ M', cells[7])
    assert sorted(p.name for p in (tmp_path / 'assets').iterdir()) == [
        'fashion_resnet-18_1xb64_custom-32px_3e_seed0.json',
        'fashion_t2t-vit-lite_1xb64_custom-32px_3e_seed0.json',
        'fashion_top1.png',
    ]


def test_levers_trains_the_missing_runs_and_prints_their_row(tmp_path, capsys):
    script = load_script()
    data = make_folders(script, tmp_path)
    logs = tmp_path / 'logs'
    arguments = [
        'levers',
        str(RECIPE),
        '--levers',
        'recipe',
        'drloc',
        '--sets',
        'fashion',
        '--epochs',
        '3',
        '--logs',
        str(logs),
        '--project-logs',
        str(logs),
        '--data-root',
        str(data),
        '--work-dir',
        str(tmp_path / 'runs'),
        '--speed-rounds',
        '1',
    ]
    assert script.main([*arguments, '--run']) == 0
    assert sorted(p.name for p in logs.iterdir()) == [
        'fashion_mimetic_3e_seed0.json',
        'fashion_mimetic_drloc_3e_seed0.json',
    ]
    out = capsys.readouterr().out
    assert (
        'projects/small_data/configs/t2t-vit-lite_1xb64_custom-32px-drloc.py'
        in out
    )
    # a second call reads the logs, trains nothing and draws the curves
    figure = tmp_path / 'levers.png'
    assert script.main([*arguments, '--figure', str(figure)]) == 0
    assert figure.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    out = capsys.readouterr().out
    assert 'tools/train.py' not in out
    rows = {
        cells[0]: cells[1:]
        for cells in (
            [c.strip() for c in line.strip('|').split('|')]
            for line in out.splitlines()
            if line.startswith(('| recipe', '| drloc'))
        )
    }
    for lever, cells in rows.items():
        middle = '_drloc' if lever == 'drloc' else ''
        log = logs / f'fashion_mimetic{middle}_3e_seed0.json'
        records = [json.loads(line) for line in log.open()]
        (top1,) = [r['accuracy/top1'] for r in records if 'accuracy/top1' in r]
        assert cells[0] == f'{top1:.1f}'
    # the localisation MLP of 2 x 128 -> 512 -> 512 -> 2 trains beside
    # the recipe: neither its parameters nor MACs serve inference
    model, _ = script.model_of(str(RECIPE))
    params = sum(p.numel() for p in model.parameters())
    assert rows['recipe'][1] == f'{params / 1e6:.2f} M'
    assert rows['drloc'][1] == rows['recipe'][1]
    assert rows['drloc'][2] == rows['recipe'][2]


def test_frontier_prints_each_candidate_beside_the_reference(
    monkeypatch, capsys
):
    script = load_script()
    # a round takes 1 us per parameter: each ratio is the reference's
    # parameter count over the candidate's
    monkeypatch.setattr(
        't2t_plugin.analysis.speed.time_steps',
        lambda step, iters: (
            1e-6 * sum(p.numel() for p in step.model.parameters())
        ),
    )
    arguments = ['frontier', str(RECIPE), '--rounds', '2', '--iters', '1']
    candidates = ['--candidates', 'recipe', 'strides_221']
    assert script.main(arguments + candidates) == 0
    out = capsys.readouterr().out
    rows = {
        cells[0]: cells[1:]
        for cells in (
            [c.strip() for c in line.strip('|').split('|')]
            for line in out.splitlines()
            if line.startswith(('| resnet-18', '| recipe', '| strides_221'))
        )
    }
    assert list(rows) == ['resnet-18', 'recipe', 'strides_221']
    params = {
        'resnet-18': script.model_of(str(REFERENCE))[0],
        'recipe': script.model_of(str(RECIPE))[0],
    }
    params = {
        k: sum(p.numel() for p in m.parameters()) for k, m in params.items()
    }
    ratio = params['resnet-18'] / params['recipe']
    assert rows['recipe'][0] == f'{params["recipe"] / 1e6:.2f} M'
    # train x and infer x
    assert rows['recipe'][3] == rows['recipe'][5] == f'{ratio:.2f}'
    assert rows['resnet-18'][3] == '1.00'
    # images/s: 64 images per round of one step
    assert rows['recipe'][2] == f'{64 / (1e-6 * params["recipe"]):.0f}'
    # strides 2, 2, 1: the second T2T layer on 8x8 tokens, not 16x16
    macs = {name: float(cells[1].split()[0]) for name, cells in rows.items()}
    assert macs['strides_221'] < macs['recipe']

"""Official-layout checkpoints through every entry point; the model index.

A fake official release is written from a randomly initialised classifier
with the official key names (listed here from the release files, not taken
from the converter). Every way of loading it must give the logits of the
converter tool's output.
"""

import copy
import pickle
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import load_checkpoint
from mmpretrain import get_model, list_models
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.model_index import NAME_SUFFIX

from ..helpers import ROOT, load_tool, run_main, run_mmpretrain_tool

converter = load_tool('tools/model_converters/t2t_vit_official_to_plugin.py')

RELEASES = 'https://github.com/yitu-opensource/T2T-ViT/releases/download/main/'
ENTRIES = {
    '7': '71.7_T2T_ViT_7.pth.tar',
    '10': '75.2_T2T_ViT_10.pth.tar',
    '12': '76.5_T2T_ViT_12.pth.tar',
    '14': '81.5_T2T_ViT_14.pth.tar',
    '19': '81.9_T2T_ViT_19.pth.tar',
    '24': '82.3_T2T_ViT_24.pth.tar',
    't-14': '81.7_T2T_ViTt_14.pth.tar',
    't-19': '82.4_T2T_ViTt_19.pth.tar',
    't-24': '82.6_T2T_ViTt_24.pth.tar',
    '14-384px': '83.3_T2T_ViT_14.pth.tar',
}

# our layout -> the official module names
PERFORMER = {
    'ln1': 'norm1',
    'attn.kqv': 'kqv',
    'attn.proj': 'proj',
    'attn.random_matrix': 'w',
    'ln2': 'norm2',
    'ffn.layers.0.0': 'mlp.0',
    'ffn.layers.1': 'mlp.2',
}
TIMM_BLOCK = {
    'ln1': 'norm1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'ln2': 'norm2',
    'ffn.layers.0.0': 'mlp.fc1',
    'ffn.layers.1': 'mlp.fc2',
}


def _rename(name, table):
    for ours, theirs in table.items():
        if name.startswith(ours + '.') or name == ours:
            return theirs + name[len(ours) :]
    raise KeyError(name)


def official_keys(state_dict, token_layer):
    """Our classifier's weights under the official names."""
    t2t_table = PERFORMER if token_layer == 'performer' else TIMM_BLOCK
    out = {}
    for key, value in state_dict.items():
        parts = key.split('.')
        if key.startswith('backbone.tokens_to_token.attention'):
            rest = '.'.join(parts[3:])
            new = f'tokens_to_token.{parts[2]}.{_rename(rest, t2t_table)}'
        elif key.startswith('backbone.encoder.'):
            rest = '.'.join(parts[3:])
            new = f'blocks.{parts[2]}.{_rename(rest, TIMM_BLOCK)}'
        elif key.startswith('head.layers.head.'):
            new = 'head.' + parts[-1]
        else:
            new = key[len('backbone.') :]
        out['module.' + new] = value.clone()
    return out


TINY = """
_base_ = ['{root}/configs/t2t-vit-mini_1xb64_digits.py']
model = dict(backbone=dict(arch=dict(token_layer='{token_layer}')))
test_dataloader = dict(batch_size=64)
"""


def tiny_config(folder, token_layer):
    path = Path(folder) / f'digits_{token_layer}.py'
    path.write_text(TINY.format(root=ROOT, token_layer=token_layer))
    return path


def build(cfg):
    """The model as get_model builds it, with the config's preprocessor."""
    model_cfg = cfg.model.copy()
    model_cfg.setdefault('data_preprocessor', cfg.get('data_preprocessor'))
    return MODELS.build(model_cfg)


def random_classifier(cfg):
    model = build(cfg)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.normal_(0, 0.2 if 'head' in name else 0.1)
    return model.eval()


def write_release(cfg, token_layer, path):
    """A fake official release of ``cfg``'s model; returns that model."""
    model = random_classifier(cfg)
    weights = official_keys(model.state_dict(), token_layer)
    if token_layer == 'performer':  # the random matrices are never trained
        assert any(k.endswith('.w') for k in weights)
    torch.save({'state_dict_ema': weights}, path)
    return model


def converted_model(cfg, release, tmp_path):
    """The reference: our model loaded with the converter tool's output."""
    slim = tmp_path / 'converted.pth'
    arch = cfg.model.backbone.arch
    heads = (
        [] if isinstance(arch, str) else ['--num-heads', str(arch.num_heads)]
    )
    assert converter.main([str(release), str(slim)] + heads) == 0
    model = build(cfg).eval()
    model.load_state_dict(torch.load(slim)['state_dict'], strict=True)
    return model, slim


@pytest.fixture(scope='module', params=['performer', 'transformer'])
def release(request, tmp_path_factory):
    """An official release of a tiny model and what it computes, made once
    per token layer for the tests that read it."""
    tmp_path = tmp_path_factory.mktemp(f'release-{request.param}')
    config = tiny_config(tmp_path, request.param)
    cfg = Config.fromfile(str(config))
    path = tmp_path / 'official.pth.tar'
    original = write_release(cfg, request.param, path)
    reference, slim = converted_model(cfg, path, tmp_path)
    images = torch.randint(0, 256, (4, 1, 8, 8)).float()
    with torch.no_grad():
        expected = reference(
            reference.data_preprocessor(dict(inputs=images))['inputs']
        )
        assert torch.allclose(
            expected,
            original(
                original.data_preprocessor(dict(inputs=images))['inputs']
            ),
            atol=1e-6,
        )
    return dict(
        config=config,
        cfg=cfg,
        path=path,
        slim=slim,
        images=images,
        expected=expected,
        reference=reference,
    )


def logits(model, images):
    with torch.no_grad():
        return model(model.data_preprocessor(dict(inputs=images))['inputs'])


def test_get_model_reads_official_releases(release):
    model = get_model(str(release['config']), pretrained=str(release['path']))
    torch.testing.assert_close(
        logits(model, release['images']),
        release['expected'],
        atol=1e-5,
        rtol=0,
    )


def test_load_checkpoint_reads_official_releases(release):
    # the Runner's load_from and resume read through this function
    model = build(release['cfg']).eval()
    load_checkpoint(model, str(release['path']), strict=True)
    torch.testing.assert_close(
        logits(model, release['images']),
        release['expected'],
        atol=1e-5,
        rtol=0,
    )


def test_pretrained_init_reads_official_releases(release):
    cfg = copy.deepcopy(release['cfg'])
    cfg.model.backbone.init_cfg = dict(
        type='Pretrained', checkpoint=str(release['path']), prefix='backbone.'
    )
    model = build(cfg)
    model.init_weights()
    model.eval()
    images = release['reference'].data_preprocessor(
        dict(inputs=release['images'])
    )['inputs']
    with torch.no_grad():
        got = model.extract_feat(images)[-1]
        want = release['reference'].extract_feat(images)[-1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_test_tool_reads_official_releases(release, tmp_path, capsys):
    test_tool = load_tool('tools/test.py')
    work = tmp_path / 'work'
    scores = {}
    for name in ('path', 'slim'):
        out = tmp_path / f'{name}.pkl'
        sys.argv = [
            'test.py',
            str(release['config']),
            str(release[name]),
            '--work-dir',
            str(work),
            '--out',
            str(out),
        ]
        assert test_tool.main() == 0
        with open(out, 'rb') as f:
            predictions = pickle.load(f)
        assert len(predictions) == 359  # the digits' val split
        scores[name] = torch.stack([p['pred_score'] for p in predictions])
    torch.testing.assert_close(
        scores['path'], scores['slim'], atol=1e-5, rtol=0
    )


def test_index_lists_every_release():
    names = list_models(f'*{NAME_SUFFIX}')
    expected = {
        f't2t-vit-{arch.replace("-384px", "")}_8xb64_in1k'
        f'{"-384px" if arch.endswith("384px") else ""}{NAME_SUFFIX}'
        for arch in ENTRIES
    }
    assert set(names) == expected
    from mmpretrain.apis import ModelHub

    for arch, asset in ENTRIES.items():
        name = [
            n
            for n in names
            if n.startswith(f't2t-vit-{arch.split("-384px")[0]}_')
            and ('384px' in n) == arch.endswith('384px')
        ]
        assert len(name) == 1, arch
        entry = ModelHub.get(name[0])
        assert entry.weights == RELEASES + asset
        assert entry.results[0].task == 'Image Classification'
        assert entry.config.model.backbone.type == 'T2TViT'


def test_no_name_clashes_with_mmpretrain():
    import mmpretrain
    from modelindex.load_model_index import load

    index = Path(mmpretrain.__file__).parent / '.mim' / 'model-index.yml'
    upstream = load(str(index))
    upstream.build_models_with_collections()
    theirs = {m.name.lower() for m in upstream.models}
    ours = set(list_models(f'*{NAME_SUFFIX}'))
    assert len(ours) == len(ENTRIES) and not ours & theirs
    # with both indexes registered, mmpretrain's own T2T models still list
    assert 't2t-vit-t-14_8xb64_in1k' in list_models('*t2t*')


@pytest.mark.parametrize('name', sorted(ENTRIES))
def test_each_entry_config_builds(name):
    from mmpretrain.apis import ModelHub

    arch = name.split('-384px')[0]
    suffix = '-384px' if name.endswith('384px') else ''
    entry = ModelHub.get(f't2t-vit-{arch}_8xb64_in1k{suffix}{NAME_SUFFIX}')
    model = MODELS.build(entry.config.model)
    assert model.backbone.arch_settings['num_layers'] > 0
    assert model.head.num_classes == 1000


def test_index_weights_through_url_mapping(tmp_path):
    """get_model(name, pretrained=True) with the URL mapped to a file."""
    name = f't2t-vit-7_8xb64_in1k{NAME_SUFFIX}'
    from mmpretrain.apis import ModelHub

    cfg = ModelHub.get(name).config
    write_release(cfg, 'performer', tmp_path / ENTRIES['7'])
    reference, _ = converted_model(cfg, tmp_path / ENTRIES['7'], tmp_path)
    model = get_model(
        name, pretrained=True, url_mapping=(RELEASES, f'{tmp_path}/')
    )
    images = torch.randint(0, 256, (1, 3, 224, 224)).float()
    torch.testing.assert_close(
        logits(model, images), logits(reference, images), atol=1e-5, rtol=0
    )
    assert len(model._dataset_meta['classes']) == 1000


def test_dense_pretrained_init_reads_official_releases(tmp_path):
    """The det/seg configs' backbone set-up, built in mmdet's scope."""
    pytest.importorskip('mmdet.models')
    from mmdet.registry import MODELS as DET_MODELS
    from mmengine.registry import DefaultScope

    classifier_cfg = ModelHubConfig('t-14')
    path = tmp_path / ENTRIES['t-14']
    write_release(classifier_cfg, 'transformer', path)
    reference, _ = converted_model(classifier_cfg, path, tmp_path)
    backbone_cfg = dict(
        type='mmpretrain.T2TViT',
        arch='t-14',
        out_type='featmap',
        init_cfg=dict(
            type='Pretrained', checkpoint=str(path), prefix='backbone.'
        ),
    )
    with DefaultScope.overwrite_default_scope('mmdet'):
        backbone = DET_MODELS.build(backbone_cfg)
    backbone.init_weights()
    ours = backbone.state_dict()
    for key, value in reference.backbone.state_dict().items():
        torch.testing.assert_close(ours[key], value, atol=0, rtol=0)
    # the configs name the release itself
    # (the configs for your own data start from scratch or a path you give)
    configs = sorted(
        p
        for p in (ROOT / 'configs').glob('[ds]e[tg]/*.py')
        if 'custom' not in p.name
    )
    assert len(configs) == 6
    for config in configs:
        arch = 't-14' if 'vit-t-14' in config.name else '14'
        assert 'yitu-opensource/T2T-ViT/releases/' in config.read_text()
        assert ENTRIES[arch] in config.read_text(), config


def ModelHubConfig(arch):  # noqa: N802
    from mmpretrain.apis import ModelHub

    return ModelHub.get(f't2t-vit-{arch}_8xb64_in1k{NAME_SUFFIX}').config


def test_mmpretrain_analysis_tools_read_test_predictions(tmp_path):
    """mmpretrain's analyze_results.py / confusion_matrix.py on our --out."""
    config = tiny_config(tmp_path, 'performer')
    checkpoint = tmp_path / 'weights.pth'
    cfg = Config.fromfile(str(config))
    torch.save(
        dict(state_dict=random_classifier(cfg).state_dict()), checkpoint
    )
    out = tmp_path / 'pred.pkl'
    tested = run_main(
        'test', config, checkpoint, '--out', out,
        '--work-dir', tmp_path / 'work',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    with open(out, 'rb') as f:
        predictions = pickle.load(f)
    labels = torch.tensor([int(p['gt_label']) for p in predictions])
    guesses = torch.stack([p['pred_label'] for p in predictions]).flatten()
    done = run_mmpretrain_tool(
        'analysis_tools/confusion_matrix', config, out,
        '--out', tmp_path / 'cm.pkl',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / 'cm.pkl', 'rb') as f:
        matrix = pickle.load(f)
    assert int(matrix.sum()) == len(predictions)
    assert int(matrix.diag().sum()) == int((labels == guesses).sum())
    done = run_mmpretrain_tool(
        'analysis_tools/analyze_results', config, out,
        '--out-dir', tmp_path / 'analysis', '--topk', 2,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    drawn = list((tmp_path / 'analysis').rglob('*.png'))
    assert 0 < len(drawn) <= 4

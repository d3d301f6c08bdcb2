"""Official T2T-ViT weights -> plugin checkpoints, against the official math.

``Official*`` below restate the official model (github.com/yitu-opensource/
T2T-ViT, ``models/t2t_vit.py``, ``token_transformer.py``,
``token_performer.py``) in plain PyTorch with its module names, so their
state dicts have the official key layout. Tiny widths keep the tests fast.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmpretrain import get_model
from mmpretrain.apis import ImageClassificationInferencer
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import MODELS
from torch import nn

import t2t_plugin  # noqa: F401
from t2t_plugin.apis import preprocess_image
from t2t_plugin.converters import (
    convert_official_state_dict,
    describe_arch,
    detect_official_arch,
    extract_state_dict,
    matching_config,
)
from t2t_plugin.models.backbones import T2TViT

from ..helpers import ROOT, load_tool

# the converter is handed the arch table it matches weights against
ZOO_OF_OURS = T2TViT.arch_zoo

converter_tool = load_tool(
    'tools/model_converters/t2t_vit_official_to_plugin.py'
)


class OfficialMlp(nn.Module):
    def __init__(self, in_features, hidden_features, out_features=None):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features or in_features)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class OfficialAttention(nn.Module):
    """``Attention`` of the official code; ``in_dim`` set for T2T layers."""

    def __init__(self, dim, num_heads, in_dim=None):
        super().__init__()
        self.num_heads = num_heads
        self.in_dim = in_dim
        # the official scale: dim is the *input* width, also for T2T layers
        self.scale = (dim // num_heads) ** -0.5
        out_dim = in_dim or dim
        self.qkv = nn.Linear(dim, out_dim * 3, bias=False)
        self.proj = nn.Linear(out_dim, out_dim)

    def forward(self, x):
        batch, length, _ = x.shape
        width = self.in_dim or x.shape[-1]
        qkv = (
            self.qkv(x)
            .reshape(batch, length, 3, self.num_heads, width // self.num_heads)
            .permute(2, 0, 3, 1, 4)
        )
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(batch, length, width)
        out = self.proj(out)
        if self.in_dim is not None:
            out = v.squeeze(1) + out
        return out


class OfficialTokenTransformer(nn.Module):
    def __init__(self, dim, in_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = OfficialAttention(dim, num_heads=1, in_dim=in_dim)
        self.norm2 = nn.LayerNorm(in_dim)
        self.mlp = OfficialMlp(in_dim, in_dim)

    def forward(self, x):
        x = self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class OfficialTokenPerformer(nn.Module):
    def __init__(self, dim, in_dim, kernel_ratio=0.5):
        super().__init__()
        self.emb = in_dim
        self.kqv = nn.Linear(dim, 3 * self.emb)
        self.proj = nn.Linear(self.emb, self.emb)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(self.emb)
        self.mlp = nn.Sequential(
            nn.Linear(self.emb, self.emb),
            nn.GELU(),
            nn.Linear(self.emb, self.emb),
            nn.Dropout(0.1),
        )
        self.m = int(self.emb * kernel_ratio)
        w = torch.randn(self.m, self.emb)
        self.w = nn.Parameter(
            nn.init.orthogonal_(w) * math.sqrt(self.m), requires_grad=False
        )

    def prm_exp(self, x):
        xd = (x * x).sum(dim=-1, keepdim=True).repeat(1, 1, self.m) / 2
        wtx = torch.einsum('bti,mi->btm', x.float(), self.w)
        return torch.exp(wtx - xd) / math.sqrt(self.m)

    def single_attn(self, x):
        k, q, v = torch.split(self.kqv(x), self.emb, dim=-1)
        kp, qp = self.prm_exp(k), self.prm_exp(q)
        D = torch.einsum('bti,bi->bt', qp, kp.sum(dim=1)).unsqueeze(dim=2)
        kptv = torch.einsum('bin,bim->bnm', v.float(), kp)
        y = torch.einsum('bti,bni->btn', qp, kptv) / (
            D.repeat(1, 1, self.emb) + 1e-8
        )
        return v + self.proj(y)

    def forward(self, x):
        x = self.single_attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class OfficialBlock(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = OfficialAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = OfficialMlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class OfficialT2TModule(nn.Module):
    def __init__(self, tokens_type, embed_dim, token_dim):
        super().__init__()
        self.soft_split0 = nn.Unfold(
            kernel_size=(7, 7), stride=(4, 4), padding=(2, 2)
        )
        self.soft_split1 = nn.Unfold(
            kernel_size=(3, 3), stride=(2, 2), padding=(1, 1)
        )
        self.soft_split2 = nn.Unfold(
            kernel_size=(3, 3), stride=(2, 2), padding=(1, 1)
        )
        layer = (
            OfficialTokenPerformer
            if tokens_type == 'performer'
            else OfficialTokenTransformer
        )
        self.attention1 = layer(3 * 7 * 7, token_dim)
        self.attention2 = layer(token_dim * 3 * 3, token_dim)
        self.project = nn.Linear(token_dim * 3 * 3, embed_dim)

    def forward(self, x):
        x = self.soft_split0(x).transpose(1, 2)
        for attention, split in (
            (self.attention1, self.soft_split1),
            (self.attention2, self.soft_split2),
        ):
            x = attention(x)
            batch, length, channels = x.shape
            side = int(np.sqrt(length))
            x = x.transpose(1, 2).reshape(batch, channels, side, side)
            x = split(x).transpose(1, 2)
        return self.project(x)


def official_sinusoid(n_position, d_hid):
    table = np.array(
        [
            [pos / np.power(10000, 2 * (j // 2) / d_hid) for j in range(d_hid)]
            for pos in range(n_position)
        ]
    )
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table).unsqueeze(0)


class OfficialT2TViT(nn.Module):
    def __init__(
        self,
        img_size,
        tokens_type,
        embed_dim,
        depth,
        num_heads,
        mlp_ratio,
        token_dim=64,
        num_classes=1000,
    ):
        super().__init__()
        self.tokens_to_token = OfficialT2TModule(
            tokens_type, embed_dim, token_dim
        )
        num_patches = (img_size // 16) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(
            official_sinusoid(num_patches + 1, embed_dim), requires_grad=False
        )
        self.blocks = nn.ModuleList(
            OfficialBlock(embed_dim, num_heads, mlp_ratio)
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.tokens_to_token(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


TINY = dict(
    img_size=64,
    embed_dim=32,
    depth=2,
    num_heads=2,
    mlp_ratio=2,
    token_dim=16,
    num_classes=7,
)


def tiny_official(tokens_type):
    model = OfficialT2TViT(tokens_type=tokens_type, **TINY)
    with torch.no_grad():
        # non-trivial norms, biases and class token, so that all of them count
        for name, param in model.named_parameters():
            if 'norm' in name:
                param.normal_(1.0 if name.endswith('weight') else 0.0, 0.2)
            elif name.endswith('bias') or name == 'cls_token':
                param.normal_(0, 0.2)
    return model.eval()


def classifier_for(arch_info, img_size=None):
    """Our classifier for a detected arch (as a config would build it)."""
    arch = {
        k: arch_info[k]
        for k in (
            'token_layer',
            'embed_dims',
            'num_layers',
            'num_heads',
            'feedforward_channels',
        )
    }
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='T2TViT',
                arch=arch,
                img_size=img_size or arch_info['img_size'],
                t2t_cfg=dict(token_dims=arch_info['token_dims']),
            ),
            head=dict(
                type='T2TClsHead',
                num_classes=arch_info['num_classes'],
                in_channels=arch_info['embed_dims'],
            ),
        )
    ).eval()


@pytest.mark.parametrize('tokens_type', ['performer', 'transformer'])
@pytest.mark.parametrize('wrapping', ['state_dict_ema', 'state_dict', 'bare'])
def test_round_trip_reproduces_official_logits(
    tmp_path, capsys, tokens_type, wrapping
):
    official = tiny_official(tokens_type)
    weights = {f'module.{k}': v for k, v in official.state_dict().items()}
    src = tmp_path / 'official.pth.tar'
    torch.save(weights if wrapping == 'bare' else {wrapping: weights}, src)

    # heads are not in the weights: a custom arch needs them given
    assert (
        converter_tool.main(
            [str(src), str(tmp_path / 'ours.pth'), '--num-heads', '2']
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        f'custom T2T-ViT ({tokens_type} T2T layers, embed_dims 32, 2 '
        'layers, 2 heads, 64px, 7 classes)' in out
    )

    checkpoint = torch.load(tmp_path / 'ours.pth', weights_only=True)
    assert set(checkpoint) == {'state_dict', 'meta'}
    arch_info = checkpoint['meta']['arch']
    assert arch_info['token_dims'] == 16 and arch_info['num_classes'] == 7
    ours = classifier_for(arch_info)
    ours.load_state_dict(checkpoint['state_dict'], strict=True)
    if tokens_type == 'performer':
        # the fixed random features travel with the weights
        for index in (1, 2):
            layer = getattr(ours.backbone.tokens_to_token, f'attention{index}')
            w = getattr(official.tokens_to_token, f'attention{index}').w
            assert torch.equal(layer.attn.random_matrix, w)

    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = official(images)
        logits = ours(images)
    assert expected.abs().max() > 0.1
    assert (logits - expected).abs().max() <= 1e-4


def test_official_224_weights_load_into_a_larger_resolution():
    official = tiny_official('performer')
    converted, arch_info = convert_official_state_dict(
        official.state_dict(), arch_zoo=ZOO_OF_OURS
    )
    assert arch_info['img_size'] == 64
    ours = classifier_for(arch_info, img_size=96)
    ours.load_state_dict(converted, strict=True)
    table = ours.backbone.pos_embed
    assert table.shape == (1, 1 + 6 * 6, 32)
    source = official.pos_embed
    torch.testing.assert_close(table[:, :1], source[:, :1])
    grid = source[:, 1:].reshape(1, 4, 4, 32).permute(0, 3, 1, 2)
    resized = F.interpolate(
        grid, size=(6, 6), mode='bicubic', align_corners=False
    )
    torch.testing.assert_close(
        table[:, 1:], resized.flatten(2).transpose(1, 2)
    )
    with torch.no_grad():
        assert torch.isfinite(ours(torch.randn(1, 3, 96, 96))).all()


def _zoo_entry(tokens_type, embed_dim, depth, num_heads, mlp_ratio):
    return dict(
        tokens_type=tokens_type,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
    )


# the official model factories (t2t_vit.py), arch name -> arguments
ZOO = {
    '7': _zoo_entry('performer', 256, 7, 4, 2),
    '10': _zoo_entry('performer', 256, 10, 4, 2),
    '12': _zoo_entry('performer', 256, 12, 4, 2),
    '14': _zoo_entry('performer', 384, 14, 6, 3),
    '19': _zoo_entry('performer', 448, 19, 7, 3),
    '24': _zoo_entry('performer', 512, 24, 8, 3),
    't-14': _zoo_entry('transformer', 384, 14, 6, 3),
    't-19': _zoo_entry('transformer', 448, 19, 7, 3),
    't-24': _zoo_entry('transformer', 512, 24, 8, 3),
}


def _official_shapes(arch, img_size=224):
    """Weights of a full-size official model, without the cost of init."""
    with torch.device('meta'):
        model = OfficialT2TViT(img_size=img_size, **ZOO[arch])
    return model.state_dict()


@pytest.mark.parametrize(
    'arch,config',
    [(arch, f'configs/t2t-vit-{arch}_8xb64_in1k.py') for arch in ZOO]
    + [('14', 'configs/t2t-vit-14_8xb64_in1k-384px.py')],
)
def test_zoo_weights_load_strictly_into_their_config(arch, config):
    converted, arch_info = convert_official_state_dict(
        _official_shapes(arch), arch_zoo=ZOO_OF_OURS
    )
    assert arch_info['arch'] == arch
    assert arch_info['num_heads'] == ZOO[arch]['num_heads']
    assert (arch_info['img_size'], arch_info['num_classes']) == (224, 1000)
    # the converter names the config of the release's resolution
    assert matching_config(arch_info) == config.replace('-384px', '')
    model_cfg = Config.fromfile(str(ROOT / config)).model
    model = MODELS.build(model_cfg).to('meta')
    model.load_state_dict(converted, strict=True)


def test_converted_release_classifies_like_the_official_model(tmp_path):
    """Official weights -> converter -> ImageNet config -> inference API."""
    official = OfficialT2TViT(img_size=224, **ZOO['7']).eval()
    src = tmp_path / '71.7_T2T_ViT_7.pth.tar'
    torch.save({'state_dict_ema': official.state_dict()}, src)
    dst = tmp_path / 't2t-vit-7.pth'
    assert converter_tool.main([str(src), str(dst)]) == 0

    config = str(ROOT / 'configs/t2t-vit-7_8xb64_in1k.py')
    image = np.random.default_rng(0).integers(0, 255, (260, 300, 3))
    image = image.astype(np.uint8)
    # the converted file, and the release itself (converted on load)
    for weights in (dst, src):
        model = get_model(config, pretrained=str(weights))
        result = ImageClassificationInferencer(model)(image)[0]
        inputs, _ = preprocess_image(model, image)
        assert inputs.shape == (1, 3, 224, 224)
        with torch.no_grad():
            expected = official(inputs).softmax(-1)[0]
        torch.testing.assert_close(
            torch.as_tensor(result['pred_scores']),
            expected,
            atol=1e-5,
            rtol=1e-4,
        )
    best = int(expected.argmax())
    assert result['pred_class'] == IMAGENET_CATEGORIES[best]


def test_given_heads_pick_the_zoo_arch_that_has_them():
    weights = _official_shapes('14')
    assert (
        detect_official_arch(weights, num_heads=32, arch_zoo=ZOO_OF_OURS)[
            'arch'
        ]
        == '14-resnext'
    )
    custom = detect_official_arch(weights, num_heads=12, arch_zoo=ZOO_OF_OURS)
    assert (custom['arch'], custom['num_heads']) == (None, 12)


def test_384px_official_weights_are_detected():
    arch_info = detect_official_arch(
        _official_shapes('14', img_size=384), arch_zoo=ZOO_OF_OURS
    )
    assert (arch_info['arch'], arch_info['img_size']) == ('14', 384)


@pytest.mark.parametrize(
    'checkpoint,message',
    [
        (
            {'state_dict': {'conv1.weight': torch.zeros(1)}},
            'not an official T2T-ViT checkpoint',
        ),
        ({'backbone.cls_token': torch.zeros(1, 1, 8)}, 'already in the'),
        ([torch.zeros(1)], 'not a T2T-ViT checkpoint'),
        ({'epoch': 3}, 'not a tensor'),
    ],
)
def test_foreign_state_dicts_are_refused(checkpoint, message):
    with pytest.raises(ValueError, match=message):
        convert_official_state_dict(extract_state_dict(checkpoint))


def test_unknown_keys_are_refused():
    weights = dict(tiny_official('transformer').state_dict())
    weights['blocks.0.attn.rel_pos'] = torch.zeros(3)
    with pytest.raises(ValueError, match=r'blocks\.0\.attn\.rel_pos'):
        convert_official_state_dict(weights)


def test_tool_reports_bad_files_in_one_line(tmp_path, capsys):
    text = tmp_path / 'notes.pth.tar'
    text.write_text('not a checkpoint')
    resnet = tmp_path / 'resnet.pth'
    torch.save({'state_dict': {'conv1.weight': torch.zeros(2)}}, resnet)
    for src, message in (
        (text, 'not a complete PyTorch checkpoint'),
        (resnet, 'not an official T2T-ViT checkpoint'),
        (tmp_path / 'missing.pth', 'does not exist'),
    ):
        assert converter_tool.main([str(src), str(tmp_path / 'x.pth')]) == 1
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('error: ')
        assert message in lines[0]
    assert not (tmp_path / 'x.pth').exists()


def test_tool_converts_a_folder(tmp_path, capsys):
    sources = tmp_path / 'official'
    sources.mkdir()
    for name in ('a', 'b'):
        weights = tiny_official('performer').state_dict()
        torch.save(
            {'state_dict_ema': weights}, sources / f'T2T_{name}.pth.tar'
        )
    assert converter_tool.main([str(sources), str(tmp_path / 'out')]) == 0
    written = sorted(p.name for p in (tmp_path / 'out').iterdir())
    assert written == ['T2T_a.pth', 'T2T_b.pth']
    assert capsys.readouterr().out.count('found a custom T2T-ViT') == 2


def test_tool_reports_an_unwritable_destination_and_goes_on(tmp_path, capsys):
    src = tmp_path / 'T2T_tiny.pth.tar'
    torch.save(
        {'state_dict_ema': tiny_official('performer').state_dict()}, src
    )
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a folder')
    assert converter_tool.main([str(src), str(blocker / 'out.pth')]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: ')


def test_tool_never_writes_over_its_source(tmp_path, capsys):
    """DST that is the source (links resolved) is refused, an existing
    file that is not a checkpoint only without --force; an earlier
    conversion is replaced. The source stays as it was."""
    src = tmp_path / 'T2T_tiny.pth.tar'
    torch.save(
        {'state_dict_ema': tiny_official('performer').state_dict()}, src
    )
    before = src.read_bytes()
    link = tmp_path / 'link.pth'
    link.symlink_to(src)
    notes = tmp_path / 'notes.pth'
    notes.write_text('mine')
    for dst, extra, end in (
        (
            src,
            ['--force'],
            f'is the source {src}, an input of this '
            'command; give another path.',
        ),
        (
            link,
            [],
            f'is the source {src}, an input of this command; give '
            'another path.',
        ),
        (
            notes,
            [],
            'exists and is not a checkpoint; give a new name, or '
            '--force to replace it.',
        ),
    ):
        assert converter_tool.main([str(src), str(dst), *extra]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f'error: DST {dst} {end}']
    assert src.read_bytes() == before and notes.read_text() == 'mine'
    out = tmp_path / 'out.pth'
    for _ in range(2):  # the second run replaces the first's checkpoint
        assert converter_tool.main([str(src), str(out)]) == 0
    assert converter_tool.main([str(src), str(notes), '--force']) == 0
    assert src.read_bytes() == before


def test_zoo_archs_of_the_same_shapes_are_named():
    weights = _official_shapes('14')
    plain = detect_official_arch(weights, arch_zoo=ZOO_OF_OURS)
    assert (plain['arch'], plain['num_heads']) == ('14', 6)
    assert plain['same_shapes'] == [('14-resnext', 32)]
    assert describe_arch(plain).endswith(
        '6 heads, 224px, 1000 classes) (same weight shapes as 14-resnext; '
        'pass --num-heads 32 if this is that model)'
    )
    # the release's own file name tells the ResNeXt-like variant
    named = detect_official_arch(
        weights, file_name='T2T_ViT_14_ResNeXt.pth.tar', arch_zoo=ZOO_OF_OURS
    )
    assert (named['arch'], named['num_heads']) == ('14-resnext', 32)
    assert named['heads_from_name'] and named['same_shapes'] == [('14', 6)]
    assert (
        '(heads of 14-resnext, as the file name says) (same weight '
        'shapes as 14; pass --num-heads 6' in describe_arch(named)
    )
    # given heads win over the file name, and leave nothing to say
    given = detect_official_arch(
        weights,
        num_heads=6,
        file_name='t2t_vit_14_resnext.pth',
        arch_zoo=ZOO_OF_OURS,
    )
    assert (given['arch'], given['same_shapes']) == ('14', [])
    assert 'same weight shapes' not in describe_arch(given)
    alone = detect_official_arch(_official_shapes('19'), arch_zoo=ZOO_OF_OURS)
    assert alone['same_shapes'] == [] and not alone['heads_from_name']


def test_tool_names_the_arch_of_the_same_shapes(tmp_path, capsys, monkeypatch):
    from t2t_plugin.models import T2TViT

    tiny = dict(
        token_layer='performer',
        embed_dims=32,
        num_layers=2,
        feedforward_channels=64,
    )
    # a tiny pair of zoo archs that differ only in heads, as 14 and
    # 14-resnext do
    monkeypatch.setattr(
        T2TViT,
        'arch_zoo',
        {
            'tiny': dict(tiny, num_heads=2),
            'tiny-resnext': dict(tiny, num_heads=4),
        },
    )
    weights = tiny_official('performer').state_dict()
    for name, heads in (('tiny.pth', 2), ('tiny_resnext.pth', 4)):
        torch.save({'state_dict_ema': weights}, tmp_path / name)
        assert (
            converter_tool.main(
                [str(tmp_path / name), str(tmp_path / f'out_{name}')]
            )
            == 0
        )
        line = capsys.readouterr().out.strip()
        assert f'{heads} heads' in line
        meta = torch.load(tmp_path / f'out_{name}', weights_only=True)['meta']
        assert meta['arch']['num_heads'] == heads
        if heads == 2:
            assert (
                '(same weight shapes as tiny-resnext; pass --num-heads '
                '4 if this is that model)'
            ) in line
        else:
            assert '(heads of tiny-resnext, as the file name says)' in line

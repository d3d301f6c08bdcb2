"""The named T2T-ViT archs and how an ``arch`` value resolves to them:
the backbone builds from them, and the tools answer a wrong name before
the models are imported."""

import re
from typing import Optional, Union

from mmengine.config import Config

from .config import leaves

# name: token layer, embed_dims, encoder layers, heads, mlp ratio
_ARCHS = {
    '7': ('performer', 256, 7, 4, 2),
    '10': ('performer', 256, 10, 4, 2),
    '12': ('performer', 256, 12, 4, 2),
    '14': ('performer', 384, 14, 6, 3),
    '19': ('performer', 448, 19, 7, 3),
    '24': ('performer', 512, 24, 8, 3),
    't-14': ('transformer', 384, 14, 6, 3),
    't-19': ('transformer', 448, 19, 7, 3),
    't-24': ('transformer', 512, 24, 8, 3),
    '14-resnext': ('performer', 384, 14, 32, 3),
    '14-wide': ('performer', 768, 4, 12, 3),
}

# ``T2TViT.arch_zoo``: each name also as ``t2t-vit-<name>``.
ARCH_ZOO: dict[str, dict] = {
    alias: dict(
        token_layer=layer,
        embed_dims=dims,
        num_layers=depth,
        num_heads=heads,
        feedforward_channels=int(dims * ratio),
    )
    for name, (layer, dims, depth, heads, ratio) in _ARCHS.items()
    for alias in (name, f't2t-vit-{name}')
}


def arch_names() -> list[str]:
    """The arch names, without their ``'t2t-vit-'`` aliases."""
    return sorted(
        {k for k in ARCH_ZOO if '-vit-' not in k},
        key=lambda name: (name.startswith('t-'), len(name), name),
    )


def resolve_arch(arch: Union[str, int, dict]) -> dict:
    """The settings of an arch name (``7``, ``'T2T-ViT-14'``, ``'14@384'``,
    which adds ``img_size``) or custom arch dict.

    Raises:
        ValueError: For an unknown name or a custom arch with missing or
            unknown keys, listing what is accepted.
    """
    if isinstance(arch, int) and not isinstance(arch, bool):
        arch = str(arch)
    if isinstance(arch, str):
        key = arch.strip().lower().replace('_', '-')
        key = re.sub(r'^t2t-?vit-?', '', key)
        match = re.fullmatch(r'(.+?)(?:@|-)(224|384)(?:px)?', key)
        if match and match.group(1) in ARCH_ZOO:
            size = int(match.group(2))
            return dict(ARCH_ZOO[match.group(1)], img_size=size)
        if key not in ARCH_ZOO:
            raise ValueError(
                f'Unknown T2T-ViT arch {arch!r}; choose one of '
                f'{", ".join(arch_names())} (also as t2t-vit-NAME, '
                'any case, NAME@384 at 384 px) or pass a dict.'
            )
        return dict(ARCH_ZOO[key])
    if not isinstance(arch, dict):
        raise ValueError(
            f'arch must be an arch name or a dict, got {arch!r} '
            f'({type(arch).__name__}); choose one of '
            f'{", ".join(arch_names())}.'
        )
    required = {'embed_dims', 'num_layers', 'num_heads'}
    optional = {'token_layer', 'feedforward_channels', 'mlp_ratio'}
    missing = required - set(arch)
    unknown = set(arch) - required - optional
    if missing or unknown:
        raise ValueError(
            f'A custom T2T-ViT arch needs the keys {sorted(required)} '
            f'and may set {sorted(optional)}; missing {sorted(missing)}'
            f', unknown {sorted(unknown)}.'
        )
    settings = {'token_layer': 'performer', **arch}
    mlp_ratio = settings.pop('mlp_ratio', 3.0)
    settings.setdefault(
        'feedforward_channels', int(arch['embed_dims'] * mlp_ratio)
    )
    return settings


def arch_problem(cfg: Config) -> Optional[str]:
    """The line for a T2T-ViT ``arch`` of the model config that is no arch
    name or a custom arch without the keys it needs, listing the names;
    None if every arch resolves."""
    for key, node in leaves({'model': cfg.get('model')}):
        if (
            isinstance(node, dict)
            and str(node.get('type', '')).split('.')[-1] == 'T2TViT'
            and 'arch' in node
        ):
            try:
                resolve_arch(node['arch'])
            except ValueError as error:
                return f'{key}.arch: {error}'
    return None

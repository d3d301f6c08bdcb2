"""Input widths of the plugin's necks and heads, read off the backbone.

mmdet and mmseg build a model's backbone, neck and heads one after the
other from separate config dicts, so a neck cannot ask the backbone it will
be fed by for its output widths. The widths of :class:`T2TFeaturePyramid`
(``(token_dims, token_dims, embed_dims, ...)``) and of :class:`T2TClsHead`
(``embed_dims``) are fixed by the backbone config alone, however, and no
other value can work. So the tools set them from the backbone config after
``--cfg-options`` are merged and before anything is built: changing
``model.backbone.arch`` (or ``out_indices``, ``t2t_cfg.token_dims``) is
then the only edit. Lazy modules (``nn.LazyConv2d``) would defer the widths
to the first forward instead, after weight initialisation, the optimizer
and checkpoint loading have already needed them.
"""

from typing import Optional

from mmengine.config import Config

from ..models import T2TViT


def _type_name(node: dict) -> str:
    """``'T2TViT'`` for ``type='T2TViT'`` and ``'mmpretrain.T2TViT'``."""
    kind = node.get('type', '')
    return kind.split('.')[-1] if isinstance(kind, str) else ''


def t2t_output_widths(backbone: dict) -> Optional[tuple[int, ...]]:
    """Channel widths of the outputs of a ``T2TViT`` config.

    Args:
        backbone (dict): A backbone config.

    Returns:
        tuple[int] | None: One width per output (the T2T maps first when
        ``out_t2t_maps``), or None for a backbone of another type.

    Raises:
        ValueError: For an unknown arch name.
    """
    if _type_name(backbone) != 'T2TViT':
        return None
    settings = T2TViT.resolve_arch(backbone.get('arch', '14'))
    out_indices = backbone.get('out_indices', -1)
    count = 1 if isinstance(out_indices, int) else len(out_indices)
    widths = (settings['embed_dims'],) * count
    if backbone.get('out_t2t_maps', False):
        token_dims = (backbone.get('t2t_cfg') or {}).get('token_dims', 64)
        widths = (token_dims, token_dims) + widths
    return widths


def follow_backbone_widths(cfg: Config) -> list[str]:
    """Set the plugin's neck and head input widths from the backbone.

    ``T2TFeaturePyramid.in_channels`` (a neck, or the first of a list of
    necks) and ``T2TClsHead.in_channels`` follow the ``T2TViT`` backbone of
    ``cfg.model``; other models and modules are left alone.

    Args:
        cfg (Config): A run config, its ``--cfg-options`` merged.

    Returns:
        list[str]: ``'model.neck.0.in_channels=(64, 64, 256)'`` for each
        value that was changed.
    """
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(
        model.get('backbone'), dict
    ):
        return []
    widths = t2t_output_widths(model['backbone'])
    if widths is None:
        return []
    changed = []
    necks = model.get('neck')
    entries = (
        [('model.neck', necks)]
        if isinstance(necks, dict)
        else [(f'model.neck.{i}', n) for i, n in enumerate(necks or ())]
    )
    for key, neck in entries:
        if (
            isinstance(neck, dict)
            and _type_name(neck) == 'T2TFeaturePyramid'
            and tuple(neck.get('in_channels') or ()) != widths
        ):
            neck['in_channels'] = widths
            changed.append(f'{key}.in_channels={widths}')
    head = model.get('head')
    if (
        isinstance(head, dict)
        and _type_name(head) == 'T2TClsHead'
        and head.get('in_channels') != widths[-1]
    ):
        head['in_channels'] = widths[-1]
        changed.append(f'model.head.in_channels={widths[-1]}')
    return changed

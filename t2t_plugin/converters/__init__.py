"""Conversion of foreign T2T-ViT weights to this plugin's layout: one
pure function per layout, which the checkpoint reader applies."""

from .mmpretrain import mmpretrain_to_plugin
from .official import (
    convert_official_checkpoint,
    convert_official_state_dict,
    describe_arch,
    detect_official_arch,
    extract_state_dict,
    is_official,
    matching_config,
    official_to_plugin,
)

__all__ = [
    'convert_official_checkpoint',
    'convert_official_state_dict',
    'describe_arch',
    'detect_official_arch',
    'extract_state_dict',
    'is_official',
    'matching_config',
    'mmpretrain_to_plugin',
    'official_to_plugin',
]

"""Inference with a config and checkpoint: the model built by
``get_model`` with its weights loaded strictly (``get_model`` only warns;
non-finite weights are refused), the config's test pipeline, and an image
read and checked against a token budget before the model sees it."""

from pathlib import Path
from typing import Optional, Union

import cv2
import numpy as np
import torch
from mmcv.image import imread
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmpretrain.apis import ModelHub, get_model
from mmpretrain.datasets import remove_transform
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import TRANSFORMS
from PIL import Image
from torch import nn

from t2t_preflight.config import load_config

from ..compat import model_config, model_dataset_meta, set_model_dataset_meta
from ..runtime.checkpoint import load_state_dict_strictly, read_checkpoint
from ..runtime.skip_bad_images import image_size
from .input_checks import token_count

# What a bad image file raises on decoding: OpenCV asserts (cv2.error) on
# an empty or damaged buffer, instead of returning None.
IMAGE_ERRORS = (OSError, ValueError, TypeError, cv2.error)


def load_model(
    model: Union[str, Path, Config],
    checkpoint: Optional[str] = None,
    device: str = 'cpu',
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """Build a classifier with ``get_model``, load weights strictly and
    return it in eval mode (ConfigError, CheckpointError; ValueError for a
    name not in the index).

    Args:
        model (str | Path | Config): A config file, a config, or a name of
            ``mmpretrain.list_models()``.
        checkpoint (str, optional): A file or URL. None: the index entry's
            weights for a name, the random initialisation for a config.
        device (str): Where to run. Defaults to ``'cpu'``.
        cfg_options (dict, optional): Config overrides.
    """
    if isinstance(model, Config) or str(model).endswith('.py'):
        cfg = load_config(model, cfg_options)
    else:
        metainfo = ModelHub.get(str(model))
        cfg = load_config(metainfo.config, cfg_options)
        checkpoint = checkpoint or metainfo.weights
    # get_model builds without init_weights: init_cfg files are not read
    built = get_model(cfg, pretrained=False)
    if checkpoint:
        loaded = read_checkpoint(str(checkpoint))
        load_state_dict_strictly(built, loaded, str(checkpoint))
        meta = loaded.get('meta') or {}
        if (meta.get('dataset_meta') or {}).get('classes'):
            set_model_dataset_meta(built, meta['dataset_meta'])
    _match_class_names(built)
    return built.to(device).eval()


def _match_class_names(model: nn.Module) -> None:
    """ImageNet's class names, or none, for a head whose number of classes
    is not that of the test dataset's names, which get_model gives."""
    num_classes = getattr(getattr(model, 'head', None), 'num_classes', None)
    classes = model_dataset_meta(model).get('classes')
    if num_classes is None or (classes and len(classes) == num_classes):
        return
    set_model_dataset_meta(
        model, dict(classes=IMAGENET_CATEGORIES) if num_classes == 1000 else {}
    )


def test_pipeline(cfg: Config) -> Compose:
    """The test pipeline without file loading, as the inferencer builds
    it, with a ``ConvertImage`` first if it has none (colour files reach a
    1-channel model as grey levels)."""
    steps = remove_transform(
        cfg.test_dataloader.dataset.pipeline, 'LoadImageFromFile'
    )
    if not any(
        str(step.get('type', '')).endswith('ConvertImage') for step in steps
    ):
        channels = cfg.model.get('backbone', {}).get('in_channels', 3)
        steps = [dict(type='ConvertImage', channels=channels)] + list(steps)
    return Compose([TRANSFORMS.build(step) for step in steps])


def read_image_input(image: Union[str, Path, np.ndarray]) -> dict:
    """A pipeline sample of an image file or array, as the inferencer
    makes it (FileNotFoundError; ValueError: not an image)."""
    if isinstance(image, (str, Path)):
        read_image_size(image)
        try:
            decoded = imread(str(image))
        except cv2.error:
            decoded = None
        if decoded is None:
            raise ValueError(
                f'{image} is not an image that OpenCV can '
                'decode; give a JPEG, PNG or other image file.'
            )
        image = decoded
    return dict(
        img=image, img_shape=image.shape[:2], ori_shape=image.shape[:2]
    )


def read_image_size(image: Union[str, Path]) -> tuple[int, int]:
    """``(width, height)`` of an image file from its header alone, so that
    an image too large to decode is refused at no cost (FileNotFoundError;
    ValueError: empty, not an image, too many pixels)."""
    path = Path(image)
    if not path.is_file():
        raise FileNotFoundError(f'Image not found: {image}.')
    if path.stat().st_size == 0:
        raise ValueError(f'{image} is empty (0 bytes); replace or remove it.')
    try:
        return image_size(path)
    except Image.DecompressionBombError as error:
        raise ValueError(f'{image}: {error} first.') from None
    except (OSError, SyntaxError, ValueError) as error:
        raise ValueError(
            f'{image} is not an image that can be read ({error}); give a '
            'JPEG, PNG or other image file.'
        ) from None


def check_token_budget(
    model: nn.Module, image: Union[str, Path, np.ndarray], max_tokens: int
) -> None:
    """Refuse (ValueError) an image that the test pipeline turns into more
    than ``max_tokens`` tokens; for a pipeline that keeps the image size,
    from the size in the file's header, before the image is decoded."""
    kinds = [
        str(step.get('type', ''))
        for step in model_config(model).test_dataloader.dataset.pipeline
    ]
    resizes = any('Resize' in kind or 'Crop' in kind for kind in kinds)
    if isinstance(image, (str, Path)) and not resizes:
        width, height = read_image_size(image)
    else:
        packed = test_pipeline(model_config(model))(read_image_input(image))
        height, width = packed['inputs'].shape[-2:]
    tokens = token_count(
        height, width, model.backbone.tokens_to_token.total_stride
    )
    if tokens > max_tokens:
        raise ValueError(
            f'{image}: the test pipeline gives a {width}x{height} input, '
            f'{tokens} tokens, above the budget of {max_tokens}; resize the '
            'image, add a Resize to the test pipeline, or raise '
            '--max-tokens.'
        )


@torch.no_grad()
def preprocess_image(
    model: nn.Module, image: Union[str, Path, np.ndarray]
) -> tuple[torch.Tensor, np.ndarray]:
    """The normalised batch ``(1, C, H, W)`` of an image file or BGR array
    for a model of :func:`load_model`, and the image after the test
    pipeline (not normalised) as ``(H, W, 3)`` uint8 RGB, to draw on."""
    packed = test_pipeline(model_config(model))(read_image_input(image))
    picture = packed['inputs'].permute(1, 2, 0).cpu().numpy()
    if picture.shape[2] == 1:
        picture = np.repeat(picture, 3, axis=2)
    else:
        picture = picture[..., ::-1]  # pipelines hold BGR, as cv2 decodes
    picture = np.ascontiguousarray(picture.clip(0, 255).astype(np.uint8))
    data = model.data_preprocessor(pseudo_collate([packed]), False)
    return data['inputs'], picture

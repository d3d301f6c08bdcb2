"""Single-image classification with a config and a checkpoint.

mmpretrain's ``inference_model`` does not take the config path of a model
outside its own model zoo; these functions take any config of this
repository (or a :class:`Config`) and work on CPU.
"""
import pickle
import re
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import mmcv
import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmpretrain.registry import DATASETS, MODELS, TRANSFORMS
from PIL import Image, ImageOps
from torch import nn

# registers the models and lets torch.load read mmengine checkpoints
from .. import engine, models  # noqa: F401

ImageInput = Union[str, Path, np.ndarray, Image.Image]
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')


def load_config(config: Union[str, Path, Config],
                cfg_options: Optional[dict] = None) -> Config:
    """A config from a file (or a copy of one), with options merged in."""
    if isinstance(config, (str, Path)):
        if not Path(config).is_file():
            raise FileNotFoundError(f'Config file {config} does not exist.')
        config = Config.fromfile(str(config))
    elif isinstance(config, Config):
        config = config.copy()
    else:
        raise TypeError('config must be a file path or a Config, got '
                        f'{type(config).__name__}.')
    if cfg_options:
        config.merge_from_dict(cfg_options)
    return config


def load_checkpoint_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``.

    Slim checkpoints (``state_dict`` + ``meta``, as written by the
    converter) load as they are; mmengine's training checkpoints load
    through the allow-list of :mod:`t2t_plugin.engine.checkpoint`. Any other
    Python object in the file is refused.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file is not a checkpoint or holds other objects.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'Checkpoint {path} does not exist.')
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as error:
        # torch >= 2.4 names a 'GLOBAL', older torch a 'class'
        found = re.search(r'(?:GLOBAL|class) (\S+)', str(error))
        name = found.group(1) if found else 'unknown'
        raise ValueError(
            f'{path} holds Python objects that are not weights ({name}); '
            'save the state dict alone with '
            "torch.save({'state_dict': model.state_dict()}, path)."
        ) from None
    except Exception as error:  # torch fails in many ways on other files
        raise ValueError(f'{path} is not a torch checkpoint (torch '
                         f'raised {type(error).__name__}).') from None
    if not isinstance(checkpoint, Mapping):
        raise ValueError(
            f'{path} holds a {type(checkpoint).__name__}, not a checkpoint '
            "dict; save one with torch.save({'state_dict': "
            'model.state_dict()}, path).')
    return checkpoint


def _load_weights(model: nn.Module, checkpoint: Dict[str, Any],
                  path: Union[str, Path]) -> None:
    state_dict = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state_dict, Mapping):
        raise ValueError(
            f"The 'state_dict' of {path} is a {type(state_dict).__name__}, "
            'not a dict of weights; save model.state_dict() there.')
    state_dict = {
        key[len('module.'):] if key.startswith('module.') else key: value
        for key, value in state_dict.items()
    }
    try:
        result = model.load_state_dict(state_dict, strict=False)
    except (RuntimeError, ValueError) as error:
        detail = str(error).strip().splitlines()
        raise ValueError(f'{path} does not fit the config: '
                         f'{" ".join(line.strip() for line in detail[:3])}')
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f'{path} does not fit the config: {len(result.missing_keys)} '
            f'weights missing (e.g. {result.missing_keys[:2]}), '
            f'{len(result.unexpected_keys)} unexpected (e.g. '
            f'{result.unexpected_keys[:2]}). Use the config the checkpoint '
            'was trained or converted for.')


def _dataset_classes(cfg: Config) -> Optional[Sequence[str]]:
    dataset = cfg.get('test_dataloader', {}).get('dataset', {})
    metainfo = dataset.get('metainfo') or {}
    if metainfo.get('classes'):
        return metainfo['classes']
    if dataset.get('classes'):
        return dataset['classes']
    dataset_type = dataset.get('type')
    if isinstance(dataset_type, str):
        dataset_cls = DATASETS.get(dataset_type)
        metainfo = getattr(dataset_cls, 'METAINFO', None) or {}
        return metainfo.get('classes')
    return None


def class_names(num_classes: int, cfg: Optional[Config] = None,
                checkpoint_meta: Optional[dict] = None) -> List[str]:
    """Names of a classifier's classes.

    Taken, in this order, from the checkpoint's ``dataset_meta``, the
    config's test dataset, ImageNet for 1000 classes, or ``'class i'``;
    a source whose number of classes differs is skipped.

    Args:
        num_classes (int): Outputs of the classifier.
        cfg (Config, optional): The model's config.
        checkpoint_meta (dict, optional): The ``meta`` of its checkpoint.

    Returns:
        List[str]: One name per class.
    """
    from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
    candidates = [
        ((checkpoint_meta or {}).get('dataset_meta') or {}).get('classes'),
        _dataset_classes(cfg) if cfg is not None else None,
        IMAGENET_CATEGORIES,
    ]
    for names in candidates:
        if names is not None and len(names) == num_classes:
            return list(names)
    return [f'class {index}' for index in range(num_classes)]


def init_model(config: Union[str, Path, Config],
               checkpoint: Optional[Union[str, Path]] = None,
               device: Union[str, torch.device] = 'cpu',
               cfg_options: Optional[dict] = None) -> nn.Module:
    """Build a classifier from a config and load a checkpoint strictly.

    Args:
        config (str | Path | Config): Config file or object.
        checkpoint (str | Path, optional): Weights to load (a slim or an
            mmengine training checkpoint). Without it the model keeps its
            random initialisation.
        device (str | torch.device): Where to run. Defaults to ``'cpu'``.
        cfg_options (dict, optional): Config overrides.

    Returns:
        nn.Module: The model in eval mode, with ``cfg`` and
        ``dataset_meta`` (``classes``) attributes.
    """
    cfg = load_config(config, cfg_options)
    cfg.model.setdefault('data_preprocessor', cfg.get('data_preprocessor'))
    # the checkpoint replaces whatever the config would load, and batch
    # augmentations (mixup, cutmix) only act in training
    cfg.model.get('backbone', {}).pop('init_cfg', None)
    cfg.model.pop('train_cfg', None)
    model = MODELS.build(cfg.model)
    meta: dict = {}
    if checkpoint is not None:
        loaded = load_checkpoint_file(checkpoint)
        meta = loaded.get('meta') or {}
        _load_weights(model, loaded, checkpoint)
    else:
        model.init_weights()
    head = getattr(model, 'head', None)
    num_classes = getattr(head, 'num_classes', None)
    if num_classes is not None:
        model.dataset_meta = dict(
            classes=class_names(num_classes, cfg, meta))
    model.cfg = cfg
    return model.to(device).eval()


def build_test_pipeline(cfg: Config) -> Callable[[dict], dict]:
    """The config's test pipeline as a callable on one decoded sample.

    Image loading steps are left out: :func:`inference_model` decodes the
    image itself, so that configs whose datasets hold arrays work as well.

    Args:
        cfg (Config): A config with ``test_dataloader.dataset.pipeline``
            (or ``test_pipeline``).
    """
    pipeline_cfg = cfg.get('test_dataloader', {}).get('dataset', {}).get(
        'pipeline') or cfg.get('test_pipeline')
    if not pipeline_cfg:
        raise ValueError('The config has no test pipeline '
                         '(test_dataloader.dataset.pipeline); add one.')
    transforms = [
        TRANSFORMS.build(step) for step in pipeline_cfg
        if step['type'] not in ('LoadImageFromFile', 'mmcv.LoadImageFromFile')
    ]

    def run(sample: dict) -> dict:
        for transform in transforms:
            sample = transform(sample)
        return sample

    return run


def list_images(path: Union[str, Path]) -> List[Path]:
    """An image file, or the image files of a folder, sorted.

    Raises:
        FileNotFoundError: If there is no image.
    """
    source = Path(path)
    if source.is_dir():
        images = sorted(p for p in source.iterdir()
                        if p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise FileNotFoundError(f'{source} holds no image files.')
        return images
    if not source.is_file():
        raise FileNotFoundError(f'{source} does not exist.')
    return [source]


def _decode_file(path: Path, in_channels: int) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f'Image {path} does not exist.')
    # as the pipelines' LoadImageFromFile decodes: EXIF orientation applied,
    # 16-bit images scaled down to 8 bits rather than clipped
    try:
        image = mmcv.imfrombytes(
            path.read_bytes(),
            flag='grayscale' if in_channels == 1 else 'color',
            channel_order='bgr')
    except Exception:  # the decoders raise many kinds of errors on junk
        image = None
    if image is None:
        raise ValueError(f'{path} is not an image that OpenCV can decode; '
                         'give a JPEG, PNG or other image file.')
    return image


def _check_array(image: np.ndarray, in_channels: int) -> np.ndarray:
    if image.dtype != np.uint8:
        raise ValueError(
            f'Image arrays must be uint8 (0-255), got {image.dtype}; convert '
            'first, e.g. (image * 255).round().astype(np.uint8) for floats '
            'in [0, 1].')
    channels = 1 if image.ndim == 2 else image.shape[-1]
    if image.ndim not in (2, 3) or channels not in (1, 3, 4):
        raise ValueError(
            f'Image arrays must be (H, W), (H, W, 3) BGR or (H, W, 4) BGRA, '
            f'got shape {image.shape}.')
    if channels == 4:
        image = image[..., :3]  # alpha plays no part in classification
    if in_channels == 1 and channels != 1:
        return mmcv.bgr2gray(np.ascontiguousarray(image))
    if in_channels != 1 and channels == 1:
        return mmcv.gray2bgr(image.reshape(image.shape[:2]))
    return image


def read_image(image: ImageInput, in_channels: int = 3) -> np.ndarray:
    """Decode an image as OpenMMLab pipelines expect it.

    Files are decoded as ``LoadImageFromFile`` does (``mmcv.imfrombytes``),
    so the result equals what the config's test dataset would see.

    Args:
        image (str | Path | np.ndarray | PIL.Image.Image): A file, a PIL
            image (turned upright by its EXIF orientation), or a uint8 array
            (BGR, or BGRA whose alpha is dropped; grey levels are expanded
            to three channels and colours reduced to grey as the model
            needs).
        in_channels (int): 1 reads grey levels ``(H, W)``, otherwise BGR
            ``(H, W, 3)`` as ``cv2`` decodes. Defaults to 3.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If the file is not an image, or the array's type or
            shape is not one of an image.
        TypeError: If ``image`` is none of the kinds above.
    """
    if isinstance(image, np.ndarray):
        return _check_array(image, in_channels)
    if isinstance(image, (str, Path)):
        return _decode_file(Path(image), in_channels)
    if not isinstance(image, Image.Image):
        raise TypeError('image must be a file path, a PIL image or a numpy '
                        f'array, got {type(image).__name__}.')
    image = ImageOps.exif_transpose(image)
    if in_channels == 1:
        return np.asarray(image.convert('L')).copy()
    return np.asarray(image.convert('RGB'))[..., ::-1].copy()


def _pack(model: nn.Module, image: ImageInput) -> dict:
    in_channels = model.cfg.model.get('backbone', {}).get('in_channels', 3)
    img = read_image(image, in_channels)
    sample = dict(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])
    return build_test_pipeline(model.cfg)(sample)


@torch.no_grad()
def preprocess_image(model: nn.Module,
                     image: ImageInput) -> Tuple[torch.Tensor, np.ndarray]:
    """The network input for an image, and that input as a picture.

    Args:
        model (nn.Module): A model from :func:`init_model`.
        image (str | Path | np.ndarray | PIL.Image.Image): As for
            :func:`inference_model`.

    Returns:
        tuple: The normalised batch ``(1, C, H, W)`` on the model's device,
        and the image after the test pipeline (resized and cropped, not
        normalised) as ``(H, W, 3)`` uint8 RGB, to draw on.
    """
    packed = _pack(model, image)
    picture = packed['inputs'].permute(1, 2, 0).cpu().numpy()
    if picture.shape[2] == 1:
        picture = np.repeat(picture, 3, axis=2)
    else:
        picture = picture[..., ::-1]  # pipelines hold BGR, as cv2 decodes
    picture = np.ascontiguousarray(picture.clip(0, 255).astype(np.uint8))
    data = model.data_preprocessor(pseudo_collate([packed]), False)
    return data['inputs'], picture


@torch.no_grad()
def inference_model(model: nn.Module,
                    image: ImageInput,
                    topk: int = 5) -> Dict[str, Any]:
    """Classify one image with the config's test pipeline.

    Args:
        model (nn.Module): A model from :func:`init_model`.
        image (str | Path | np.ndarray | PIL.Image.Image): An image file, a
            PIL image, or an array as the config's pipeline takes it (BGR,
            as ``mmcv.imread`` returns).
        topk (int): How many classes to report. Defaults to 5.

    Returns:
        dict: ``pred_label``, ``pred_score``, ``pred_class`` of the best
        class, ``topk``: a list of ``dict(label, score, class_name)`` best
        first, and ``pred_scores``: all softmax scores (a tensor).
    """
    data = pseudo_collate([_pack(model, image)])
    scores = model.test_step(data)[0].pred_score.float().cpu()
    names = model.dataset_meta['classes']
    values, labels = scores.topk(min(topk, scores.numel()))
    ranked = [
        dict(label=int(label), score=float(value), class_name=names[label])
        for value, label in zip(values, labels)
    ]
    return dict(
        pred_label=ranked[0]['label'],
        pred_score=ranked[0]['score'],
        pred_class=ranked[0]['class_name'],
        topk=ranked,
        pred_scores=scores)

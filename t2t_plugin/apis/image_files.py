"""The image files a tool reads: an image, or a folder of images and of
class folders (``val/<class>/*.png``, as a dataset's), by name."""

from pathlib import Path
from typing import Optional, Union

# What OpenCV decodes, as mmcv's imread reads the files.
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')


def list_images(path: Union[str, Path]) -> list[Path]:
    """An image file, or the image files of a folder and of its
    sub-folders (class folders, as a dataset's ``val/<class>/``), sorted;
    other files left out (:func:`non_image_files` names them), hidden ones
    skipped (FileNotFoundError if there is no image)."""
    source = Path(path)
    if source.is_dir():
        images = sorted(
            p
            for p in source.rglob('*')
            if p.suffix.lower() in IMAGE_SUFFIXES
            and p.is_file()
            and not is_hidden(p, source)
        )
        if not images:
            raise FileNotFoundError(
                f'{source} is a folder without image files (names ending in '
                f'{", ".join(IMAGE_SUFFIXES)}); give an image or a folder '
                'of images.'
            )
        return images
    if not source.is_file():
        raise FileNotFoundError(f'Image not found: {source}.')
    return [source]


def class_folder(image: Path, root: Union[str, Path]) -> Optional[str]:
    """The class folder of an image found by :func:`list_images` in
    ``root``: the first folder below ``root``, None for an image directly
    in it (or ``root`` itself)."""
    parts = image.relative_to(root).parts if Path(root).is_dir() else ()
    return parts[0] if len(parts) > 1 else None


def image_stem(image: Path, root: Union[str, Path]) -> str:
    """A name for the files drawn of ``image``, found by
    :func:`list_images` in ``root``: its stem, after its folders below
    ``root`` (``cat_001`` for ``root/cat/001.png``), so that images of one
    name in two class folders do not overwrite each other's drawings."""
    if not Path(root).is_dir():
        return image.stem
    relative = image.relative_to(root)
    return '_'.join((*relative.parent.parts, relative.stem))


def non_image_files(folder: Union[str, Path]) -> list[Path]:
    """Files of ``folder`` (and its sub-folders) that the tools do not
    read as images, by name; hidden ones left aside."""
    folder = Path(folder)
    return sorted(
        path
        for path in folder.rglob('*')
        if path.suffix.lower() not in IMAGE_SUFFIXES
        and path.is_file()
        and not is_hidden(path, folder)
    )


def is_hidden(path: Path, folder: Path) -> bool:
    """Whether ``path`` or a folder on its way from ``folder`` is hidden
    (a name starting with a dot)."""
    return any(part.startswith('.') for part in path.relative_to(folder).parts)

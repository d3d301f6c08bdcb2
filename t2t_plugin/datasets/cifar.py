"""CIFAR from the python-pickle files on disk, read without running code.

mmpretrain's CIFAR classes check md5 sums and download the archive when a
check fails, which breaks offline and on re-packed copies of the data, and
they unpickle with ``pickle.load``, which runs code a crafted batch holds.
"""

import os.path as osp

import numpy as np
from mmpretrain.datasets import CIFAR10, CIFAR100
from mmpretrain.registry import DATASETS

from t2t_preflight import doc_pages

from ..option_checks import check_choice, check_dataset_options, check_path
from ..runtime.safe_pickle import load_data_pickle


class _LocalCIFARMixin:
    def __init__(self, data_root: str, split: str = 'train', **kwargs) -> None:
        owner = type(self).__name__
        check_path(owner, 'data_root', data_root)
        check_choice(owner, 'split', split, ('train', 'test'))
        check_dataset_options(owner, kwargs)
        super().__init__(
            data_root=data_root, split=split, download=False, **kwargs
        )

    def load_data_list(self) -> list[dict]:
        """Load the images (HWC, RGB, uint8) and labels of the split."""
        folder = osp.join(self.data_prefix['root'], self.base_folder)
        files = self.train_list if self.split == 'train' else self.test_list
        names = [name for name, _ in files]
        missing = [
            name for name in names if not osp.isfile(osp.join(folder, name))
        ]
        if missing:
            raise FileNotFoundError(
                f'{type(self).__name__}: expected {", ".join(missing)} in '
                f'{folder} (the python version of the dataset); see '
                f'{doc_pages.DATA_PREPARATION}.'
            )
        images, labels = [], []
        for name in names:
            path = osp.join(folder, name)
            with open(path, 'rb') as f:
                entry = load_data_pickle(f, path)
            images.append(np.asarray(entry['data'], dtype=np.uint8))
            labels.extend(
                entry['labels'] if 'labels' in entry else entry['fine_labels']
            )
        # Rows are stored as 3 planes of 32x32 (CHW, RGB).
        images = np.concatenate(images).reshape(-1, 3, 32, 32)
        images = images.transpose(0, 2, 3, 1)
        return [
            dict(img=img, gt_label=int(label))
            for img, label in zip(images, labels)
        ]


@DATASETS.register_module()
class LocalCIFAR10(_LocalCIFARMixin, CIFAR10):
    """CIFAR-10 from the python-pickle files in ``data_root``: mmpretrain's
    ``CIFAR10`` without md5 checks or downloads; a missing file raises
    :class:`FileNotFoundError` naming the expected path.

    Args:
        data_root (str): Folder that holds ``cifar-10-batches-py``.
        split (str): ``'train'`` (50,000 images) or ``'test'`` (10,000).
            Defaults to ``'train'``.
        **kwargs: Other arguments of mmpretrain's ``BaseDataset``.
    """


@DATASETS.register_module()
class LocalCIFAR100(_LocalCIFARMixin, CIFAR100):
    """CIFAR-100 (fine labels) from the python-pickle files in
    ``data_root``: mmpretrain's ``CIFAR100`` without md5 checks or
    downloads.

    Args:
        data_root (str): Folder that holds ``cifar-100-python``.
        split (str): ``'train'`` (50,000 images) or ``'test'`` (10,000).
            Defaults to ``'train'``.
        **kwargs: Other arguments of mmpretrain's ``BaseDataset``.
    """

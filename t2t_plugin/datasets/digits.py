from typing import Optional

import numpy as np
from mmpretrain.datasets import BaseDataset
from mmpretrain.registry import DATASETS

from ..option_checks import (
    check_choice,
    check_dataset_options,
    check_int,
    check_ratio,
)


@DATASETS.register_module()
class DigitsDataset(BaseDataset):
    """The 1,797 handwritten digits of ``sklearn.datasets.load_digits`` as
    8x8 ``uint8`` images (0-255), nothing to download (the embedded demo's
    dataset); a fixed permutation from ``seed`` splits train and val.

    Args:
        split (str): ``'train'``, ``'val'`` or ``'all'``. Defaults to
            ``'train'``.
        val_ratio (float): Share of the images that go to ``val``.
            Defaults to 0.2 (1,438 train, 359 val images).
        seed (int): Seed of the split permutation (0 or more). Defaults
            to 0.
        pipeline (Sequence): Transforms of each sample. Defaults to ().
        **kwargs: Other arguments of mmpretrain's ``BaseDataset``.
    """

    METAINFO = {'classes': tuple(str(i) for i in range(10))}
    SPLITS = ('train', 'val', 'all')

    def __init__(
        self,
        split: str = 'train',
        val_ratio: float = 0.2,
        seed: int = 0,
        pipeline: Optional[list] = None,
        **kwargs,
    ) -> None:
        check_choice('DigitsDataset', 'split', split, self.SPLITS)
        check_ratio('DigitsDataset', 'val_ratio', val_ratio)
        check_int('DigitsDataset', 'seed', seed, minimum=0)
        check_dataset_options('DigitsDataset', kwargs)
        self.split = split
        self.val_ratio = val_ratio
        self.seed = seed
        super().__init__(ann_file='', pipeline=pipeline or (), **kwargs)

    def load_data_list(self) -> list[dict]:
        """Split the bundled digits and return this split's samples."""
        # scikit-learn takes a second to import; only this dataset needs it
        from sklearn.datasets import load_digits

        digits = load_digits()
        images = np.round(digits.images * (255 / 16)).astype(np.uint8)
        order = np.random.default_rng(self.seed).permutation(len(images))
        num_val = int(round(len(images) * self.val_ratio))
        splits = dict(val=order[:num_val], train=order[num_val:], all=order)
        return [
            dict(img=images[i], gt_label=int(digits.target[i]))
            for i in np.sort(splits[self.split])
        ]

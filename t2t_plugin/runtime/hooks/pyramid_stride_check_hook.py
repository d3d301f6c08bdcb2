import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from torch import nn

from t2t_preflight.errors import TrainingStopped

from .run_checks import bare_model, dotted_getattr, width_problem

# Where mmdet's heads state the strides of the maps they read.
_STRIDES = (
    'bbox_head.prior_generator.strides',
    'rpn_head.prior_generator.strides',
    'roi_head.bbox_roi_extractor.featmap_strides',
    'roi_head.mask_roi_extractor.featmap_strides',
)


def _format(strides: list[tuple[int, int]]) -> str:
    """``(8, 16, 32)`` for square strides, the pairs otherwise."""
    if all(w == h for w, h in strides):
        return str(tuple(w for w, _ in strides))
    return str(tuple(strides))


def measure_strides(
    model: nn.Module, size: int, in_channels: int = 3
) -> list[tuple[int, int]]:
    """The ``(w, h)`` strides of the maps ``model.extract_feat`` returns for
    one zero image of ``size`` x ``size`` pixels (a multiple of the largest
    stride, so that every stride divides it exactly)."""
    param = next(model.parameters())
    probe = torch.zeros(1, in_channels, size, size, device=param.device)
    was_training = model.training
    # no batch-norm statistics updated by the probe, no stochastic depth
    model.eval()
    try:
        with torch.no_grad():
            feats = model.extract_feat(probe)
    finally:
        model.train(was_training)
    return [(size // feat.shape[-1], size // feat.shape[-2]) for feat in feats]


@HOOKS.register_module()
class PyramidStrideCheckHook(Hook):
    """Stop a detector whose feature maps are not at its heads' strides.

    mmdet places a head's anchors (points, RoI levels) at the strides the
    config states, whatever strides the neck really returns: a RetinaNet
    whose FPN starts at stride 4 instead of 8 trains without a word, to a
    fraction of its mAP. Before a run, this hook passes one zero image
    through ``extract_feat`` and compares the strides of the maps with
    those of every head.

    Args:
        in_channels (int): Channels of the probe image. Defaults to 3.
    """

    priority = 'VERY_HIGH'

    def __init__(self, in_channels: int = 3) -> None:
        self.in_channels = in_channels

    def before_run(self, runner) -> None:
        """Stop the run (:class:`TrainingStopped`) when the strides
        differ."""
        model = bare_model(runner)
        expected = self.expected_strides(model)
        # a neck of other widths than the backbone's fails the probe:
        # RunCheckHook (or the first forward) names the key to set
        if (
            not expected
            or not hasattr(model, 'extract_feat')
            or width_problem(model)
        ):
            return
        largest = max(max(s) for strides in expected.values() for s in strides)
        measured = measure_strides(model, 2 * largest, self.in_channels)
        for where, strides in expected.items():
            # RoI extractors read the first levels only (Mask R-CNN's FPN
            # has a fifth, stride-64 level for the RPN).
            compared = (
                measured[: len(strides)]
                if 'roi_extractor' in where
                else measured
            )
            if compared != strides:
                raise TrainingStopped(
                    f'The neck returns maps at strides {_format(measured)} '
                    f'but {where} are {_format(strides)}: the head would '
                    'place its anchors at the wrong positions. Make the neck '
                    "match (an FPN after T2TFeaturePyramid's strides 8-32 "
                    'under RetinaNet: start_level=0, add_extra_convs='
                    "'on_input', num_outs=5; after strides 4-32: "
                    "start_level=1, add_extra_convs='on_input') or change "
                    'the strides of the head.'
                )

    @staticmethod
    def expected_strides(
        model: nn.Module,
    ) -> dict[str, list[tuple[int, int]]]:
        """``{'bbox_head.prior_generator.strides': [(8, 8), ...], ...}``
        for each head of ``model`` that states strides."""
        places = {where: dotted_getattr(model, where) for where in _STRIDES}
        # mmdet stores a stride as an int or a (w, h) pair
        return {
            where: [
                (int(s), int(s))
                if isinstance(s, (int, float))
                else (int(s[0]), int(s[1]))
                for s in strides
            ]
            for where, strides in places.items()
            if strides
        }

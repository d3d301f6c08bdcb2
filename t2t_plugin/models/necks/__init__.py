from .t2t_feature_pyramid import T2TFeaturePyramid

__all__ = ['T2TFeaturePyramid']

"""Where error messages and comments send a user for more: the pages of
``docs/``, in one place so that a moved section is changed once. No
imports: the tools read it before ``import t2t_plugin``."""

DATA_PREPARATION = 'docs/getting_started.md#data-preparation'
TRAINING = 'docs/training.md#training'
DENSE_PREDICTION = 'docs/dense_prediction.md'
CUSTOM_DATA = 'docs/custom_data.md'
INSTALL = 'docs/install.md'
WEIGHTS = 'docs/weights.md'


def data_page(dataset_type: str, scope: str) -> str:
    """The page that says where a dataset of ``dataset_type`` (a config's
    ``type``) goes, for a config of ``scope`` (its ``default_scope``)."""
    if scope in ('mmdet', 'mmseg'):
        return DENSE_PREDICTION
    if dataset_type.split('.')[-1] == 'CustomDataset':
        return CUSTOM_DATA
    return DATA_PREPARATION

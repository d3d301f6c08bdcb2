"""Where error messages and comments send a user for more: the pages of
``docs/``, in one place so that a moved section is changed once."""

DATA_PREPARATION = 'docs/getting_started.md#data-preparation'
TRAINING = 'docs/training.md#training'
DENSE_PREDICTION = 'docs/dense_prediction.md'
CUSTOM_DATA = 'docs/custom_data.md'
INSTALL = 'docs/install.md'
WEIGHTS = 'docs/weights.md'

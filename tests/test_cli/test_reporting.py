"""The package's errors carry their exit codes: ``run_reported`` (and so
``tools/train.py`` and ``tools/test.py``) prints the one line and exits
with the error's code, without a list of classes of its own."""

import inspect
import pickle

import pytest

from t2t_plugin.cli.reporting import run_reported
from t2t_preflight import errors

# argparse ends a tool with 2 for an option it refuses; every other
# refusal is 1 (docs/troubleshooting.md)
EXIT_CODES = {
    'RunCheckError': 1,
    'ConfigError': 1,
    'ArgumentRefused': 2,
    'TrainingStopped': 1,
    'CheckpointError': 1,
    'DataFileError': 1,
}


def error_classes() -> dict[str, type]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, Exception)
        and value.__module__ == errors.__name__
    }  # fmt: skip


def test_the_errors_are_the_six_with_their_exit_codes():
    classes = error_classes()
    assert {name: cls.exit_code for name, cls in classes.items()} == (
        EXIT_CODES
    )
    # the base every tool catches, a ValueError as the host's mistakes
    for cls in classes.values():
        assert issubclass(cls, errors.RunCheckError)
        assert issubclass(cls, ValueError)
    # what torch's strict loading and pickle raise, for code that catches
    # those
    assert issubclass(errors.CheckpointError, RuntimeError)
    assert issubclass(errors.TrainingStopped, RuntimeError)
    assert issubclass(errors.DataFileError, pickle.UnpicklingError)


@pytest.mark.parametrize('name', list(EXIT_CODES))
def test_run_reported_gives_the_errors_exit_code(name, capsys):
    def stop():
        raise error_classes()[name]('what was wrong; what to do.')

    assert run_reported(stop, 'c.py') == (EXIT_CODES[name], None)
    expected = 'what was wrong; what to do.\n'
    if name == 'DataFileError':  # the file's name first, where known
        expected = 'A data file ' + expected
    assert capsys.readouterr().err == expected


def test_a_classifier_of_other_classes_gets_the_advice_of_a_test(
    tmp_path, capsys
):
    config = tmp_path / 'run.py'
    config.write_text('model = dict()\n')
    advice = 'use the config it was trained with'

    def stop():
        raise errors.CheckpointError(
            f"The checkpoint c.pth classifies 10 classes, this model's head "
            f'1000 (num_classes); {advice}.',
            classes=10,
            advice=advice,
        )

    code, _ = run_reported(stop, str(config), checkpoint='w/c.pth')
    assert code == 1
    assert capsys.readouterr().err == (
        "The checkpoint c.pth classifies 10 classes, this model's head 1000 "
        '(num_classes); give the tool the config its run saved in the work '
        'dir or add --cfg-options model.head.num_classes=10.\n'
    )

"""Data files read through mmengine's ``load`` (``ann_file``) and the CIFAR
batches: data loads as before; a file that would run code, a damaged
pickle and malformed YAML are refused in one line, naming the file where
the dataset's ``ann_file`` is known, through our tools, mmpretrain's and
a Runner built from the config."""

import argparse
import os
import pickle
from pathlib import Path

import pytest
import yaml
from mmengine.config import Config, DictAction
from mmengine.dataset import BaseDataset
from mmengine.fileio import dump, load
from mmpretrain.datasets import BaseDataset as PretrainDataset

from t2t_plugin.runtime import (
    DataFileError,
    load_data_pickle,
)
from t2t_plugin.runtime.hooks import release_locks
from t2t_plugin.runtime.safe_pickle import annotation_files

from ..helpers import (
    forget_visualizers_and_loggers,
    last_line,
    plain_runner,
    write_class_folders,
)
from .image_folders import (
    LITE,
    lite_options,
    train_through_both_tools,
)


class _RunsCode:
    """Unpickling this object runs ``touch MARKER``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


class _External(pickle.Pickler):
    """Pickles the string 'outside' as a persistent id: a reference that
    only the program that wrote the file can resolve."""

    def persistent_id(self, obj):
        return 'ref' if obj == 'outside' else None


def annotations(root: Path) -> dict:
    """mmengine's annotation format for the ``train`` folders of
    ``helpers.write_class_folders``."""
    return {
        'metainfo': {'classes': ['c0', 'c1', 'c2']},
        'data_list': [
            {'img_path': f'c{label}/{index}.jpg', 'gt_label': label}
            for label in range(3)
            for index in range(2)
        ],
    }


def external_pickle(path: Path) -> Path:
    with open(path, 'wb') as f:
        _External(f).dump({'metainfo': {}, 'data_list': ['outside']})
    return path


def truncated_pickle(path: Path) -> Path:
    data = pickle.dumps({'metainfo': {}, 'data_list': list(range(100))})
    path.write_bytes(data[: len(data) // 2])
    return path


def malformed_yaml(path: Path) -> Path:
    path.write_text('metainfo: {classes: [c0, c1\ndata_list: []\n')
    return path


# What each damaged file's refusal says after its name.
DAMAGED = {
    'external.pkl': (
        external_pickle,
        'holds a persistent id (a reference to an object outside the '
        'file), which a data file does not need; refusing to load it: '
        'replace it with a clean copy, or write it as JSON (.json), which '
        'holds data only.',
    ),
    'cut.pkl': (
        truncated_pickle,
        'is not a complete pickle file (UnpicklingError: pickle data was '
        'truncated); replace it with a clean copy, or write it as JSON '
        '(.json).',
    ),
    'broken.yaml': (
        malformed_yaml,
        "is not valid YAML (did not find expected ',' or ']' at line 2, "
        'column 10); fix the file, or write it as JSON (.json).',
    ),
}


@pytest.mark.parametrize('suffix', ['pkl', 'yaml'])
def test_annotation_files_never_run_code(suffix, tmp_path):
    marker = tmp_path / 'marker'
    path = tmp_path / f'ann.{suffix}'
    if suffix == 'pkl':
        with open(path, 'wb') as f:
            pickle.dump({'metainfo': {}, 'data_list': [_RunsCode(marker)]}, f)
        found = 'the Python global posix.system'
    else:
        path.write_text(
            'metainfo: {}\ndata_list: !!python/object/apply:os.system '
            f'["touch {marker}"]\n'
        )
        found = 'the YAML tag tag:yaml.org,2002:python/object/apply:os.system'
    # mmengine's load gives the handlers no file name
    message = (
        f'A data file holds {found}, which a data file does not need; '
        'refusing to load it: replace it with a clean copy, or write it as '
        'JSON (.json), which holds data only.'
    )
    with pytest.raises(DataFileError) as error:
        BaseDataset(ann_file=str(path))
    assert str(error.value) == message
    assert isinstance(error.value, ValueError)
    with pytest.raises(ValueError) as error:
        PretrainDataset(ann_file=str(path), pipeline=[])
    assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        load(str(path))
    assert str(error.value) == message
    assert str(error.value.naming(str(path))) == message.replace(
        'A data file', str(path)
    )
    assert not marker.exists()


@pytest.mark.parametrize('suffix', ['pkl', 'yaml'])
def test_annotation_files_of_data_still_load(suffix, tmp_path):
    data = {
        'metainfo': {'classes': ['a', 'b']},
        'data_list': [{'img_path': 'x.png', 'gt_label': 1}],
    }
    path = tmp_path / f'ann.{suffix}'
    dump(data, str(path))
    dataset = BaseDataset(ann_file=str(path), serialize_data=False)
    assert dataset.metainfo['classes'] == ['a', 'b']
    assert dataset[0]['gt_label'] == 1
    assert dataset[0]['img_path'] == 'x.png'


@pytest.mark.skipif(not yaml.__with_libyaml__, reason='no libyaml')
def test_yaml_files_are_parsed_by_libyaml(tmp_path, monkeypatch):
    """The safe YAML handler keeps libyaml's parser, as mmengine's own
    does: an ``mmdet::`` config base reads thousands of model-index
    files through it."""

    def python_scanner(*args, **kwargs):
        raise AssertionError('parsed by the pure-Python scanner')

    monkeypatch.setattr(
        yaml.scanner.Scanner, 'fetch_more_tokens', python_scanner
    )
    path = tmp_path / 'metafile.yml'
    path.write_text('Models:\n  - Name: a\n    Config: configs/a.py\n')
    assert load(str(path)) == {
        'Models': [{'Name': 'a', 'Config': 'configs/a.py'}]
    }


@pytest.mark.parametrize('name', list(DAMAGED))
def test_damaged_data_files_are_one_line(name, tmp_path):
    write, problem = DAMAGED[name]
    path = write(tmp_path / name)
    with pytest.raises(DataFileError) as error:
        load(str(path))
    assert str(error.value) == f'A data file {problem}'
    assert error.value.__cause__ is None and error.value.__suppress_context__
    # the same error after a trip through a data-loader worker's pickle
    again = pickle.loads(pickle.dumps(error.value.naming(str(path))))
    assert str(again) == f'{path} {problem}'


def test_cifar_batches_that_are_cut_are_named(tmp_path):
    path = truncated_pickle(tmp_path / 'data_batch_1')
    with open(path, 'rb') as f, pytest.raises(DataFileError) as error:
        load_data_pickle(f, str(path))
    assert str(error.value) == (
        f'{path} is not a complete pickle file (UnpicklingError: pickle '
        'data was truncated); replace it with a clean copy, or write it as '
        'JSON (.json).'
    )
    external = external_pickle(tmp_path / 'b')
    with open(external, 'rb') as f, pytest.raises(ValueError) as error:
        load_data_pickle(f, str(external))
    assert str(error.value) == (
        f'{external} holds a persistent id (a reference to an object '
        'outside the file), which a data file does not need; refusing to '
        'load it: replace it with a clean copy, or write it as JSON (.json), '
        'which holds data only.'
    )


def test_annotation_files_of_a_dataset_config():
    config = dict(
        type='ConcatDataset',
        datasets=[
            dict(type='RepeatDataset', dataset=dict(
                data_root='/d', ann_file='a.pkl')),
            dict(data_root='/d', ann_file='/abs/b.yml'),
            dict(data_root='/d', ann_file='list.txt'),  # not through load
            dict(ann_file='c.json'),
        ],
    )  # fmt: skip
    assert annotation_files(config) == ['/d/a.pkl', '/abs/b.yml']


@pytest.mark.parametrize('name', list(DAMAGED))
def test_damaged_ann_file_is_one_line_through_every_door(name, tmp_path):
    root = write_class_folders(tmp_path / 'data')
    write, problem = DAMAGED[name]
    path = write(root / name)
    options = lite_options(
        root,
        'train_dataloader.dataset.type=BaseDataset',
        f'train_dataloader.dataset.ann_file={name}',
        f'train_dataloader.dataset.data_prefix={root}/train',
    )
    expected = f'{path} {problem}'
    ours, theirs = train_through_both_tools(tmp_path, options)
    assert ours.returncode == 1
    assert 'Traceback' not in ours.stderr
    (line,) = ours.stderr.strip().splitlines()
    assert expected in line, line
    # mmpretrain's tool builds the config's runner_type: its traceback
    # ends with the same line
    assert theirs.returncode == 1
    assert last_line(theirs.stderr).endswith(': ' + expected)
    # mmengine's own Runner (runner_type ignored): the line without the
    # name, which mmengine's load does not give
    cfg = Config.fromfile(LITE)
    namespace = argparse.Namespace()
    DictAction(None, 'cfg_options')(None, namespace, options)
    cfg.merge_from_dict(namespace.cfg_options)
    cfg.work_dir = str(tmp_path / 'door')
    forget_visualizers_and_loggers()  # as a fresh process
    with pytest.raises(DataFileError) as error:
        plain_runner(cfg).train()
    release_locks()  # as the process's end would
    assert str(error.value) == f'A data file {problem}'

"""Every shell command and Python snippet of README.md, docs/*.md and the
projects' README.md, run or checked as written.

The pages are parsed when the tests are collected, so a block added or
changed anywhere is tested without touching this file. Fenced blocks in
``bash``/``sh``/``shell`` and ``python`` are tested (``text`` blocks are
output samples). What a block gets is set by an HTML comment on the line
before its fence, which also tells the reader what stands in for what:

``<!-- doc-test: run [slow] [+ARGS] -->``
    Run it. Tool commands (``python tools/...`` or ``.dev_scripts/...``)
    run in this process through their ``main``, with ``ARGS`` appended
    (the tiny sizes: argparse lets the last value of an option win), and
    must exit 0. Comment lines under a command are the sample of its
    output shown to the reader: each must be a line it prints (without
    ``ARGS``, which change the sizes). Python snippets run in order in one
    namespace per page, from the repository root. ``slow`` marks the run
    slow.
``<!-- doc-test: config [BASE] [dataset] -->``
    The Python block is a config file in ``configs/`` (``BASE``: the
    ``_base_`` it is a fragment of): written into a copy of ``configs/``,
    loaded with mmengine and its model built. With ``dataset``, three class
    folders of two small images stand in for the data under the train and
    val loaders' ``data_root``; both datasets are built and one sample goes
    through each pipeline.
``<!-- doc-test: dry-run: WHY -->`` (the default)
    For blocks that cannot run here as written (full-size training,
    downloads, GPUs, installs): every tool command must name a tool that
    exists and parse with that tool's own argument parser, and every config
    it names must load (classification configs also build their model);
    ``bash tools/*.sh`` must name an existing script and a loadable config;
    ``make`` targets must exist in the Makefile. Python snippets must
    compile, import what they import, and use no undefined name (ruff's
    F821). Installation commands (``pip``, ``mim install``, ``python -m
    venv``) and lines that are synopses (``CONFIG``, ``[--opt]``
    placeholders, the reader's own paths such as ``PATH/TO/...`` or ``~/...``)
    are only checked for the tool they name.
"""

import contextlib
import inspect
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
from mmengine.config import Config

from .helpers import ROOT, load_tool, run_main, write_image

PAGES = [
    ROOT / 'README.md',
    *sorted((ROOT / 'docs').glob('*.md')),
    *sorted((ROOT / 'projects').glob('*/README.md')),
]
# the configs a command names: the product's and the projects'
CONFIG_WORD = re.compile(r'^(configs|projects/[\w-]+/configs)/.*\.py$')
FENCE = re.compile(
    r'(?:<!--\s*doc-test:\s*(?P<marker>.*?)\s*-->\s*\n)?'
    r'^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```',
    re.M | re.S,
)
SHELL = ('bash', 'sh', 'shell', 'console')
INSTALLERS = ('pip', 'pip3', 'conda', 'git', 'apt-get', 'source', '.', 'cd')
# CONFIG, [--opt], ..., <name>, PATH/TO/..., ~/src/...: the reader's own
PLACEHOLDER = re.compile(r'^\[|^[A-Z][A-Z0-9_]{2,}$|\.\.\.|^<|PATH/|^~')
NEEDS_MMDET = re.compile(r'\bconfigs/(det|seg)/|mmdet::|mmseg::')


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    mode: str = 'dry-run'
    slow: bool = False
    extra: list[str] = field(default_factory=list)
    base: str = ''
    with_dataset: bool = False

    @property
    def id(self) -> str:
        return f'{self.page.relative_to(ROOT)}:{self.line}'


def parse_marker(block: Block, marker: str) -> None:
    words, _, extra = marker.partition('+')
    words = words.replace(':', ' ').split()
    if not words:
        return
    block.mode = words[0]
    block.slow = 'slow' in words[1:]
    block.extra = shlex.split(extra)
    if block.mode == 'config':
        block.with_dataset = 'dataset' in words[1:]
        bases = [w for w in words[1:] if w.endswith('.py')]
        block.base = bases[0] if bases else ''


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            lang = match.group('lang').lower()
            if lang not in SHELL + ('python', 'py'):
                continue
            block = Block(
                page,
                text.count('\n', 0, match.start('body')) + 1,
                'python' if lang.startswith('py') else 'bash',
                match.group('body'),
            )
            if match.group('marker'):
                parse_marker(block, match.group('marker'))
            found.append(block)
    return found


def commands_and_samples(body: str) -> list[tuple[list[str], list[str]]]:
    """The commands of a shell block, continuation lines joined and
    comments dropped, with their leading environment assignments
    (:func:`environment`); each with the comment lines under it (its
    output sample, without the ``# ``)."""
    found: list[tuple[list[str], list[str]]] = []
    for line in body.replace('\\\n', ' ').splitlines():
        if line.lstrip().startswith('#'):
            if found:
                found[-1][1].append(line.lstrip()[1:].strip())
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote in a prose-like line
            words = line.split()
        if environment(words)[1]:
            found.append((words, []))
    return found


def environment(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command's leading ``NAME=value`` assignments, and the rest."""
    env = {}
    while words and re.match(r'^\[?[A-Z_]+=', words[0]):
        name, _, value = words[0].partition('=')
        if not name.startswith('['):  # [GPUS=8]: a synopsis
            env[name] = value
        words = words[1:]
    return env, words


def with_environment(words: list[str], monkeypatch) -> list[str]:
    """The command without its environment assignments, which are set."""
    env, words = environment(words)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return words


def shell_commands(body: str) -> list[list[str]]:
    return [words for words, _ in commands_and_samples(body)]


def _tool_path(words: list[str]) -> Optional[Path]:
    if (
        words[0] in ('python', 'python3')
        and len(words) > 1
        and words[1].endswith('.py')
        and '$' not in words[1]
    ):
        return ROOT / words[1]
    return None


def check_config(path: str) -> None:
    if NEEDS_MMDET.search(path):
        pytest.importorskip('mmdet')
        pytest.importorskip('mmseg')
    cfg = Config.fromfile(str(ROOT / path))
    if '/det/' not in path and '/seg/' not in path:
        from mmpretrain.registry import MODELS

        MODELS.build(cfg.model)


def parse_with_the_tool(tool: Path, args: list[str], monkeypatch) -> None:
    # a script's own folder is on its path when it runs (its libraries)
    monkeypatch.syspath_prepend(str(tool.parent))
    module = load_tool(str(tool.relative_to(ROOT)))
    parse = getattr(module, 'parse_args', None)
    if parse is None:
        return
    monkeypatch.setattr(sys, 'argv', [tool.name, *args])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            if inspect.signature(parse).parameters:
                parse(args)
            else:
                parse()
    except SystemExit:
        raise AssertionError(
            f'{tool.name} does not parse {args}: {err.getvalue()}'
        ) from None


def dry_run_command(words: list[str], monkeypatch) -> None:
    words = with_environment(words, monkeypatch)
    if words[0] in INSTALLERS or words[:2] in (['mim', 'install'],):
        return
    if words[0] in ('python', 'python3') and words[1:2] in (['-m'], ['-c']):
        return  # an installation step or a one-line check of one
    if words[0] == 'make':
        makefile = (ROOT / 'Makefile').read_text()
        for target in words[1:]:
            if '=' not in target:
                assert re.search(rf'^{re.escape(target)}:', makefile, re.M), (
                    f'no make target {target}'
                )
        return
    if words[0] == 'mim':
        config = next(w for w in words[2:] if w.endswith('.py'))
        assert (ROOT / 'configs' / config).is_file(), config
        return
    if words[0] == 'bash':
        assert (ROOT / words[1]).is_file(), words[1]
        for word in words[2:]:
            if CONFIG_WORD.match(word):
                check_config(word)
        return
    tool = _tool_path(words)
    if tool is None:
        return  # a command of another program, e.g. a shell variable
    assert tool.is_file(), f'{tool.relative_to(ROOT)} does not exist'
    args = words[2:]
    for word in args:
        if CONFIG_WORD.match(word):
            check_config(word)
    if not any(PLACEHOLDER.search(word) for word in args):
        parse_with_the_tool(tool, args, monkeypatch)


def run_command(words: list[str], extra: list[str], monkeypatch) -> str:
    words = with_environment(words, monkeypatch)
    tool = _tool_path(words)
    assert tool is not None, f'not a tool command: {words}'
    monkeypatch.syspath_prepend(str(tool.parent))
    if any(NEEDS_MMDET.search(word) for word in words):
        pytest.importorskip('mmdet')
        pytest.importorskip('mmseg')
    relative = tool.relative_to(ROOT)
    module = str(relative.with_suffix(''))
    if relative.parts[0] == 'tools':
        module = module.removeprefix('tools/')
    else:  # .dev_scripts: run_main loads tools/<name>.py
        module = f'../{module}'
    result = run_main(module, *words[2:], *extra)
    assert result.returncode in (0, None), (
        f'exit {result.returncode}: {result.stderr[-2000:]}'
    )
    return result.stdout


def check_python(block: Block) -> None:
    compile(block.body, block.id, 'exec')
    ruff = shutil.which('ruff') or str(Path(sys.executable).with_name('ruff'))
    if Path(ruff).exists():
        result = subprocess.run(
            [ruff, 'check', '--select', 'F821', '--no-cache', '-'],
            input=block.body,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout
    for match in re.finditer(
        r'^\s*(?:from\s+([\w.]+)\s+import\s+([\w, ]+)|import\s+([\w.]+))',
        block.body,
        re.M,
    ):
        name = match.group(1) or match.group(3)
        if name.split('.')[0] in OPTIONAL_PACKAGES:
            # the deployment runtimes and the dense toolboxes are extras
            pytest.importorskip(name.split('.')[0])
        module = __import__(name, fromlist=['_'])
        for name in filter(None, (match.group(2) or '').split(',')):
            assert hasattr(module, name.strip()), (module, name)


OPTIONAL_PACKAGES = ('onnxruntime', 'openvino', 'onnx', 'mmdet', 'mmseg')


def check_config_block(block: Block, tmp_path: Path) -> None:
    configs = tmp_path / 'configs'
    shutil.copytree(ROOT / 'configs', configs)
    text = block.body
    if block.base:
        text = f'_base_ = {block.base!r}\n{text}'
    path = configs / 'doc_snippet.py'
    path.write_text(text)
    if NEEDS_MMDET.search(text):
        pytest.importorskip('mmdet')
        pytest.importorskip('mmseg')
    cfg = Config.fromfile(str(path))
    if 'model' in cfg and not NEEDS_MMDET.search(text):
        from mmpretrain.registry import MODELS

        MODELS.build(cfg.model)
    if block.with_dataset:
        check_datasets_on_stand_ins(cfg, tmp_path)


def check_datasets_on_stand_ins(cfg: Config, tmp_path: Path) -> None:
    from mmpretrain.registry import DATASETS

    classes = ['cat', 'dog', 'fox']
    for loader in ('train_dataloader', 'val_dataloader'):
        dataset_cfg = cfg[loader].dataset
        root = tmp_path / dataset_cfg.data_root
        for name in classes:
            folder = root / dataset_cfg.get('data_prefix', '') / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(2):
                write_image(folder / f'{i}.jpg', size=(60, 50), seed=i)
        dataset_cfg.data_root = str(root)
        dataset = DATASETS.build(dataset_cfg)
        assert len(dataset) == 6
        assert list(dataset.metainfo['classes']) == classes
        sample = dataset[0]
        assert sample['inputs'].shape == (3, 224, 224)


BLOCKS = blocks()
_NAMESPACES: dict[Path, dict] = {}


def _param(block: Block):
    marks = [pytest.mark.slow] if block.slow else []
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize('block', [_param(b) for b in BLOCKS])
def test_block(block, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    if block.mode == 'config':
        check_config_block(block, tmp_path)
    elif block.mode == 'run' and block.lang == 'python':
        namespace = _NAMESPACES.setdefault(block.page, {})
        exec(compile(block.body, block.id, 'exec'), namespace)
    elif block.mode == 'run':
        for words, sample in commands_and_samples(block.body):
            printed = run_command(words, block.extra, monkeypatch)
            if sample and not block.extra:
                lines = [line.strip() for line in printed.splitlines()]
                missing = [line for line in sample if line not in lines]
                assert not missing, (
                    f'{" ".join(words)} does not print {missing}; it '
                    f'printed:\n{printed}'
                )
    elif block.mode in ('dry-run', 'dry'):
        if block.lang == 'python':
            check_python(block)
        else:
            for words in shell_commands(block.body):
                dry_run_command(words, monkeypatch)
    else:
        pytest.fail(f'unknown doc-test mode {block.mode!r} at {block.id}')


def test_the_pages_have_blocks():
    # a broken parser would otherwise pass by testing nothing
    assert len(BLOCKS) >= 40
    assert {b.page.name for b in BLOCKS} >= {'README.md', 'analysis.md'}


def test_onnx_snippet_classifies_an_image_file(tmp_path, capsys, monkeypatch):
    """deployment.md's onnxruntime snippet, on a file exported from a
    checkpoint of four named classes and a 40x50 image: it reads the
    input from the file's metadata alone and gives PyTorch's logits."""
    import numpy as np
    import torch

    import t2t_plugin  # noqa: F401
    from t2t_plugin.apis import load_model, preprocess_image
    from t2t_plugin.deployment import build_exportable, export_onnx
    from t2t_plugin.runtime import load_config

    pytest.importorskip('onnxruntime')
    (block,) = [
        b
        for b in BLOCKS
        if b.page.name == 'deployment.md' and 'custom_metadata_map' in b.body
    ]
    names = ['ant', 'bee', 'cat', 'dog']
    monkeypatch.setenv('NUM_CLASSES', str(len(names)))
    cfg = load_config(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
    checkpoint = tmp_path / 'epoch_1.pth'
    model = load_model(cfg)
    torch.save(
        {
            'state_dict': model.state_dict(),
            'meta': {'dataset_meta': {'classes': names}},
        },
        checkpoint,
    )
    onnx_file = export_onnx(
        build_exportable(cfg, checkpoint), tmp_path / 'model.onnx'
    )
    image = write_image(tmp_path / 'bee.png', size=(40, 50), seed=3)
    body = re.sub(
        r'^onnx_file = .*$',
        f'onnx_file = {str(onnx_file)!r}',
        block.body,
        flags=re.M,
    )
    body = re.sub(
        r'^image_file = .*$',
        f'image_file = {str(image)!r}',
        body,
        flags=re.M,
    )
    assert body.count(str(tmp_path)) == 2
    capsys.readouterr()  # what the export logged
    namespace: dict = {}
    exec(compile(body, block.id, 'exec'), namespace)
    inputs, _ = preprocess_image(model, image)
    with torch.no_grad():
        expected = model(inputs)[0].numpy()
    np.testing.assert_allclose(namespace['logits'], expected, atol=1e-4)
    printed = capsys.readouterr().out.strip()
    assert printed == names[int(expected.argmax())]


# The lite recipe at a tiny width.
TINY_LITE = [
    'model.backbone.arch.embed_dims=32',
    'model.backbone.arch.num_layers=1',
    'model.backbone.arch.num_heads=2',
    'model.backbone.arch.feedforward_channels=64',
    'model.head.in_channels=32',
]


def own_images_commands(page: str) -> list[list[str]]:
    """The commands of ``page``'s block that trains the lite recipe on
    class folders."""
    (block,) = [
        b
        for b in BLOCKS
        if b.page.name == page
        and 'tools/train.py configs/t2t-vit-lite_1xb64_custom-32px.py'
        in b.body
    ]
    return shell_commands(block.body)


@pytest.mark.slow
def test_own_images_flow_as_documented(tmp_path, monkeypatch):
    """README's and custom_data.md's two commands on 10 generated class
    folders (at a tiny width, two epochs), then every command the run's
    summary prints, the drawing and analysis tools, and an export with the
    recipe and --cfg-options: each exits 0, and the exported file's
    metadata gives the run's classes and input."""
    import json

    import onnx

    from .helpers import write_class_folders

    commands = own_images_commands('custom_data.md')
    assert own_images_commands('README.md') == commands
    root = write_class_folders(tmp_path / 'data', 10, suffix='.png')
    classes = [f'c{index}' for index in range(10)]
    work = tmp_path / 'work'
    documented = 'work_dirs/t2t-vit-lite_1xb64_custom-32px'

    def ours(words: list[str]) -> list[str]:
        return [
            word.replace('DATA_ROOT=data/custom', f'DATA_ROOT={root}')
            .replace('NUM_CLASSES=3', 'NUM_CLASSES=10')
            .replace(documented, str(work))
            .replace('epoch_12', 'epoch_2')
            for word in words
        ]

    def run(words: list[str], *extra) -> str:
        words = with_environment(words, monkeypatch)
        assert words[0] == 'python'
        result = run_main(
            words[1].removeprefix('tools/')[:-3], *words[2:], *extra
        )
        assert result.returncode == 0, (words, result.stderr[-3000:])
        return result.stdout

    train, test = (ours(words) for words in commands)
    assert environment(train)[0] == {
        'DATA_ROOT': str(root),
        'NUM_CLASSES': '10',
    }
    monkeypatch.setenv('MAX_EPOCHS', '2')
    monkeypatch.setenv('WARMUP_EPOCHS', '1')
    trained = run(
        train, '--work-dir', work, '--cfg-options', *TINY_LITE,
        'train_dataloader.batch_size=8',
    )  # fmt: skip
    saved = work / 't2t-vit-lite_1xb64_custom-32px.py'
    assert test[2:4] == [str(saved), str(work / 'epoch_2.pth')]
    # test.py prints top-1 once; --show-dir keeps same-named files apart
    tested = run(test, '--show-dir', 'vis')
    assert tested.count('accuracy/top1') == 1
    drawn = sorted(path.name for path in (work / 'vis').iterdir())
    assert drawn == sorted(f'{c}_{i}_0.png' for c in classes for i in (0, 1))

    summary = trained[trained.index('Next, with the config this run saved:') :]
    next_commands = [shlex.split(line) for line in summary.splitlines()[1:4]]
    for words in next_commands:
        run(words)
    onnx_file = Path(next_commands[2][4])
    meta = {
        prop.key: prop.value
        for prop in onnx.load(str(onnx_file)).metadata_props
    }
    preprocessor = Config.fromfile(str(saved)).data_preprocessor
    assert json.loads(meta['classes']) == classes
    assert json.loads(meta['mean']) == preprocessor.mean
    assert json.loads(meta['std']) == preprocessor.std
    assert json.loads(meta['input_size']) == [32, 32]
    assert meta['channel_order'] == 'RGB'

    # the drawing tools, with the saved config and with the recipe and
    # its option, and the export with the recipe
    recipe = 'configs/t2t-vit-lite_1xb64_custom-32px.py'
    checkpoint = str(work / 'epoch_2.pth')
    image = str(root / 'val' / 'c3' / '0.png')
    out = ['--out-dir', tmp_path / 'vis']
    run(['python', 'tools/visualization/vis_attention.py', str(root / 'val'),
         str(saved), checkpoint, *out])  # fmt: skip
    option = ['--cfg-options', *TINY_LITE]  # with NUM_CLASSES=10
    run(['python', 'tools/visualization/vis_features.py', image, recipe,
         checkpoint, *out, *option])  # fmt: skip
    run(['python', 'tools/deployment/pytorch2onnx.py', recipe, checkpoint,
         str(tmp_path / 'recipe.onnx'), *option])  # fmt: skip
    # the analysis tools, with the saved config
    counted = run(['python', 'tools/analysis_tools/get_flops.py', str(saved)])
    assert f'Config      {saved}' in counted.splitlines()
    run(['python', 'tools/analysis_tools/benchmark.py', str(saved),
         '--iters', '1', '--rounds', '1', '--warmup', '0',
         '--batch-size', '2'])  # fmt: skip
    # the recipe's 3 classes: the line names the saved config and variable
    monkeypatch.delenv('NUM_CLASSES')
    refused = run_main(
        'visualization/vis_features', image, recipe, checkpoint, *out,
        '--cfg-options', *TINY_LITE,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'error: The checkpoint {checkpoint} classifies 10 classes, this '
        "model's head 3 (num_classes); give the tool the config its run "
        f'saved, {saved}, or set NUM_CLASSES=10 before it.'
    )

import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup

version = {}
exec(Path('t2t_plugin/version.py').read_text(), version)

# What OpenMMLab packages ship in ``<package>/.mim``: the model index, the
# configs and the tools, so that ``mim train t2t-plugin CONFIG`` and
# ``mmpretrain.get_model(name)`` work from a plain ``pip install``.
MIM_FILES = ('model-index.yml', 'configs', 'tools')
MIM_DIR = Path('t2t_plugin', '.mim')


def add_mim_extension() -> None:
    """Copy ``MIM_FILES`` into ``t2t_plugin/.mim`` for a build.

    Only builds that package files (wheel, sdist, install) get the copy; an
    editable install reads the repository itself (see
    ``t2t_plugin.model_index.package_root``).
    """
    if not any(
        command in sys.argv
        for command in ('bdist_wheel', 'sdist', 'install', 'build')
    ):
        return
    shutil.rmtree(MIM_DIR, ignore_errors=True)
    MIM_DIR.mkdir(parents=True)
    for name in MIM_FILES:
        source = Path(name)
        if source.is_dir():
            shutil.copytree(
                source,
                MIM_DIR / name,
                ignore=shutil.ignore_patterns('__pycache__', '*.pyc'),
            )
        elif source.is_file():
            shutil.copy2(source, MIM_DIR / name)


def mim_package_data() -> list:
    """The ``.mim`` files, relative to the package, for ``package_data``."""
    return sorted(
        str(path.relative_to('t2t_plugin'))
        for path in MIM_DIR.rglob('*')
        if path.is_file()
    )


add_mim_extension()

setup(
    name='t2t-plugin',
    version=version['__version__'],
    description='T2T-ViT (Tokens-to-Token Vision Transformer) for OpenMMLab',
    long_description=Path('README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.9',
    packages=find_packages(include=['t2t_plugin', 't2t_plugin.*']),
    include_package_data=True,
    package_data={'t2t_plugin': mim_package_data()},
    # mmcv comes either as ``mmcv-lite`` (classification) or as full ``mmcv``
    # with compiled ops (detection / segmentation); both provide the same
    # package, so neither is forced here: see the ``lite`` and ``dense``
    # extras and ``make install``.
    # Lower bounds are the oldest releases the suite runs on (``make test``:
    # torch 2.1.2, the newest torch with prebuilt CUDA wheels of full mmcv;
    # docs/install.md has the tested versions).
    install_requires=[
        'torch>=2.1.2',
        'torchvision>=0.16.2',
        'mmengine>=0.10.7,<1.0',
        'mmpretrain>=1.2,<1.3',
        'numpy>=1.26',
        # ImageFont.load_default(size=...) is Pillow 10.1's
        'Pillow>=10.1',
        'matplotlib',
        'scikit-learn',
        'rich',
        # mmengine 0.10 resolves ``mmpretrain::`` / ``mmdet::`` config bases
        # with pkg_resources, which setuptools 81 removed.
        'setuptools<81',
    ],
    extras_require={
        'lite': ['mmcv-lite>=2.1,<2.2'],
        'tests': ['pytest', 'ruff'],
        # ONNX export (torch.onnx's exporter translates with onnxscript)
        # and the two CPU runtimes; see docs/deployment.md
        'deploy': [
            'onnx>=1.17',
            'onnxscript>=0.5',
            'onnxruntime>=1.20',
            'openvino>=2024.4',
        ],
        # Full mmcv with compiled ops comes from tools/install/build_mmcv.sh
        # (make install-dense); mmseg imports ftfy and regex without
        # declaring them.
        'dense': [
            'mmcv>=2.1,<2.2',
            'mmdet>=3.3,<3.4',
            'mmsegmentation>=1.2.2,<1.3',
            'ftfy',
            'regex',
        ],
    },
    classifiers=[
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)

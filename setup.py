import os
import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

version = {}
exec(Path('t2t_plugin/version.py').read_text(), version)

# What OpenMMLab packages ship in ``<package>/.mim``: the model index, the
# configs and the tools, so that ``mim train t2t-plugin CONFIG`` and
# ``mmpretrain.get_model(name)`` work from a plain ``pip install``.
MIM_FILES = ('model-index.yml', 'configs', 'tools')
MIM_DIR = Path('t2t_plugin', '.mim')
IGNORED = shutil.ignore_patterns('__pycache__', '*.pyc')


def link_mim_files() -> None:
    """Link ``t2t_plugin/.mim/*`` to the checkout for an editable install.

    As mmpretrain does in develop mode: the links always show the
    checkout's current configs and tools, so nothing goes stale.
    """
    MIM_DIR.mkdir(exist_ok=True)
    for name in MIM_FILES:
        link = MIM_DIR / name
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():  # a copy left by an older version of this file
            shutil.rmtree(link)
        link.symlink_to(Path('..', '..', name))


class BuildPyWithMim(build_py):
    """``build_py`` that puts real copies of ``MIM_FILES`` in the build
    folder's ``t2t_plugin/.mim``: a wheel holds them, the checkout stays as
    it is."""

    def run(self) -> None:
        super().run()
        # setuptools < 64 has no editable_mode (nor PEP 660 installs)
        if getattr(self, 'editable_mode', False):
            return
        target = Path(self.build_lib, MIM_DIR)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in MIM_FILES:
            source = Path(name)
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=IGNORED)
            elif source.is_file():
                shutil.copy2(source, target / name)


# A develop-mode install (setuptools < 80, ``pip install --no-use-pep517
# -e .``, as ``make install`` does) is found by openmim 0.3.9 through these
# links. A PEP 660 editable install (``pip install -e .``) reads the
# checkout itself: onedl-mim looks there, and links would show it every
# config twice.
if 'develop' in sys.argv and os.name != 'nt':
    link_mim_files()

# The two families install the same packages (``mmengine``, ``mmcv``,
# ``mmpretrain``) under different distribution names, so neither is a hard
# requirement: requiring ``mmpretrain`` would make pip install OpenMMLab's
# over the onedl ones. ``import t2t_plugin`` names the extras when neither
# is there. Lower bounds are the oldest releases the suite runs on
# (``make test``; docs/install.md has the tested versions).
OPENMMLAB = [
    'mmengine>=0.10.7,<1.0',
    'mmpretrain>=1.2,<1.3',
    # mmdet 3.3 and mmseg 1.2 assert mmcv < 2.2, and so does
    # ``import mmpretrain.models`` beside them.
    'mmcv-lite>=2.1,<2.2',
    # mmengine 0.10.7 resolves ``mmpretrain::`` / ``mmdet::`` config bases
    # with pkg_resources, which setuptools 81 removed (onedl-mmengine reads
    # them with importlib).
    'setuptools<81',
]
# onedl-mmcv is a source distribution; built by pip in isolation (no torch
# in the build environment) it has no compiled ops, as mmcv-lite.
ONEDL = [
    'onedl-mmengine>=0.10.12,<0.11',
    'onedl-mmpretrain>=1.3.6,<1.4',
    'onedl-mmcv>=2.3.6,<2.4',
]

setup(
    name='t2t-plugin',
    version=version['__version__'],
    description='T2T-ViT (Tokens-to-Token Vision Transformer) for OpenMMLab',
    long_description=Path('README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.9',
    packages=find_packages(
        include=['t2t_plugin', 't2t_plugin.*', 't2t_preflight']
    ),
    include_package_data=True,
    cmdclass={'build_py': BuildPyWithMim},
    install_requires=[
        'torch>=2.1.2',
        'torchvision>=0.16.2',
        'numpy>=1.26',
        # ImageFont.load_default(size=...) is Pillow 10.1's
        'Pillow>=10.1',
        'matplotlib',
        'scikit-learn',
        'rich',
    ],
    extras_require={
        # one of the two families, with mmcv's package without compiled ops
        # (classification); full mmcv for mmdet / mmseg: see ``dense``.
        'openmmlab': OPENMMLAB,
        'onedl': ONEDL,
        'tests': ['pytest', 'pytest-xdist', 'ruff'],
        # ONNX export (torch.onnx's exporter translates with onnxscript)
        # and the two CPU runtimes; see docs/deployment.md
        'deploy': [
            'onnx>=1.17',
            'onnxscript>=0.5',
            'onnxruntime>=1.20',
            'openvino>=2024.4',
        ],
        # OpenMMLab 2.x with full mmcv, which comes from
        # tools/install/build_mmcv.sh (make install-dense) or OpenMMLab's
        # prebuilt CUDA wheels; mmseg imports ftfy and regex without
        # declaring them.
        'dense': [
            *(req for req in OPENMMLAB if not req.startswith('mmcv-lite')),
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

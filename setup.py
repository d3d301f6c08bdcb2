from pathlib import Path

from setuptools import find_packages, setup

version = {}
exec(Path('t2t_plugin/version.py').read_text(), version)

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
    ],
    extras_require={
        'lite': ['mmcv-lite>=2.1,<2.2'],
        'tests': ['pytest', 'ruff'],
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

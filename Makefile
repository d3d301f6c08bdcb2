# The interpreter: PYTHON=... if given, else the active virtual environment,
# else the project's own .venv (made from BASE_PYTHON on first use, reused
# after), so that nothing is installed into a system Python.
BASE_PYTHON ?= python3
VENV := $(CURDIR)/.venv
ifdef PYTHON
  PYTHON_ORIGIN := PYTHON=$(PYTHON)
else ifdef VIRTUAL_ENV
  PYTHON := $(VIRTUAL_ENV)/bin/python
  PYTHON_ORIGIN := the active virtual environment
else
  PYTHON := $(VENV)/bin/python
  PYTHON_ORIGIN := the project environment .venv
  MAKE_VENV := $(VENV)/bin/python
endif
PIP := $(PYTHON) -m pip
# Dependencies install with uv (tools/install/uv_install.py gives it pip's
# indexes, constraints and certificates): parallel downloads, and one
# unpacked cache that every environment links from. Here, from an empty
# cache and with .pyc files written, the torch 2.1 environment installs in
# ~40 s instead of pip's ~140 s, the onedl one in ~30 s instead of ~150 s.
# The editable installs stay with pip (EDITABLE).
UV_PIN := uv==0.13.9
UV_INSTALL = $(1) -m pip install -q $(UV_PIN) && $(1) tools/install/uv_install.py
$(info Python: $(PYTHON) (from $(PYTHON_ORIGIN)))

# The versions this project is tested with; setup.py holds the ranges.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
# ONNX export and the runtimes the deployment tests check against.
# The formatter's output changes between releases: lint with this one.
XDIST_PIN := pytest-xdist==3.8.0
LINT_PINS := ruff==0.17.6 pytest==9.2.0 $(XDIST_PIN)
DEPLOY_PINS := onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.31.1 \
	openvino==2026.4.1
# The oldest supported stack, tested in a second environment: the newest
# torch with OpenMMLab's prebuilt CUDA wheels of full mmcv, and the lowest
# versions setup.py allows. torch 2.1 needs numpy 1; opencv 5 declares
# numpy 2, so both are pinned rather than left to the resolver.
OLD_VENV ?= $(CURDIR)/.venv-torch2.1
OLD_BASE_PYTHON ?= $(BASE_PYTHON)
OLD_PINS := torch==2.1.2 torchvision==0.16.2 numpy==1.26.4 \
	opencv-python==4.11.0.86 mmcv-lite==2.1.0 mmengine==0.10.7 \
	mmpretrain==1.2.0 Pillow==10.1.0
# The maintained continuation of OpenMMLab (onedl-* distributions, same
# package names), tested in a third environment with the pinned torch.
# onedl-mmcv and onedl-mmpretrain are source distributions: uv builds
# their wheels once and keeps them in its cache (onedl-mmcv without
# compiled ops: it builds in isolation, without torch).
ONEDL_VENV ?= $(CURDIR)/.venv-onedl
ONEDL_PINS := $(TORCH_PINS) onedl-mmengine==0.10.12 onedl-mmcv==2.3.6 \
	onedl-mmpretrain==1.3.6
# mim's release for each family (`mim train t2t-plugin CONFIG`). openmim
# declares opendatalab, whose openxlab pins setuptools 60.2, rich 13.4 and
# requests 2.28 over the tested ones; mim never imports it, so openmim
# comes without its declared dependencies and with the ones it imports.
MIM_PIN := openmim==0.3.9
MIM_DEPS := click colorama model-index pandas requests tabulate
ONEDL_MIM_PIN := onedl-mim==0.5.1
PYTEST_ARGS ?=
# The suite runs in PYTEST_WORKERS processes (pytest-xdist), one torch
# thread each, so that 2 cores are both busy while a test waits for a tool
# it started; a file's tests stay in one process (its module fixtures are
# made once: scheduled test by test, both workers made them, and a part
# of the pinned suite took 761 s against 685 s). A file's
# slow runs are split into files to spread them (test_resume*.py), and the
# files go out in tests/conftest.py's order, those with slow tests first.
# PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 2
# The other two stacks' suites (STACK_TESTS): as many, or as make test
# sets, one each.
STACK_WORKERS ?= $(PYTEST_WORKERS)
PARALLEL = $(if $(filter 0,$(1)),,-n $(1) --dist loadfile --no-loadscope-reorder)
# $(call PYTEST,PYTHON,WORKERS)
PYTEST = OMP_NUM_THREADS=1 $(1) -m pytest $(call PARALLEL,$(2))
# Disk each step takes, measured with everything installed (GB, rounded up).
VENV_GB := 7
OLD_VENV_GB := 6
ONEDL_VENV_GB := 7

.PHONY: install install-tests install-dense test test-pinned pinned-suite \
	test-torch2.1 \
	test-onedl test-slurm slurm-packages test-torch2.1-then-slurm \
	test-dev-scripts lint demo demo-env gpu-check gpu-wheels

# A failed `venv` (Debian without python3-venv) must not leave a half-made
# environment behind for the next run to trust.
NO_VENV = { rm -rf $(1); echo "Cannot create $(1) with $(2): install its venv module (Debian: apt-get install python3-venv) or name an interpreter with PYTHON=..." >&2; exit 1; }

# The registry's torch builds are CUDA builds of several GB: a full disk
# would otherwise stop pip halfway with "No space left on device".
NEED_SPACE = bash tools/install/check_disk.sh

$(VENV)/bin/python:
	$(NEED_SPACE) $(CURDIR) $(VENV_GB) "the project environment $(VENV)"
	$(BASE_PYTHON) -m venv $(VENV) || $(call NO_VENV,$(VENV),$(BASE_PYTHON))

$(OLD_VENV)/bin/python:
	$(OLD_BASE_PYTHON) -m venv $(OLD_VENV) || $(call NO_VENV,$(OLD_VENV),$(OLD_BASE_PYTHON))

$(ONEDL_VENV)/bin/python:
	$(BASE_PYTHON) -m venv $(ONEDL_VENV) || $(call NO_VENV,$(ONEDL_VENV),$(BASE_PYTHON))

# An editable install as a develop-mode egg-link to the checkout: openmim
# 0.3.9 looks for the package beside its metadata, which a PEP 660
# editable install keeps in site-packages; setuptools 80 runs `develop` as
# PEP 660 too and pip 25.3 dropped `--no-use-pep517`. setup.py links
# t2t_plugin/.mim to the checkout.
EDITABLE = $(PIP) install -q 'pip<25.3' 'setuptools>=64,<80' wheel && \
	$(PIP) install -q --no-build-isolation --no-use-pep517 -e

install: $(MAKE_VENV)
	@# full mmcv (installed by install-dense) and mmcv-lite provide the
	@# same package: the openmmlab extra brings mmcv-lite where neither is
	if $(PYTHON) -c "import mmcv" 2>/dev/null; then extra=; \
		else extra=openmmlab; fi && \
		$(call UV_INSTALL,$(PYTHON)) $(TORCH_PINS) -r setup.py \
			$${extra:+--extra $$extra} && \
		$(EDITABLE) ".$${extra:+[$$extra]}"

install-tests: install
	$(call UV_INSTALL,$(PYTHON)) -r setup.py --extra tests --extra deploy \
		$(LINT_PINS) $(DEPLOY_PINS) $(MIM_DEPS)
	$(EDITABLE) '.[tests,deploy]'
	$(PIP) install --no-deps $(MIM_PIN)

# DENSE_AFTER: make test's install-tests, whose editable install must not
# run at the same time.
DENSE_AFTER ?=
install-dense: install | $(DENSE_AFTER)
	PYTHON=$(PYTHON) bash tools/install/build_mmcv.sh
	$(call UV_INSTALL,$(PYTHON)) -r setup.py --extra dense
	$(EDITABLE) '.[dense]'

# Lint and the three stacks' suites at once: the pinned one (all the
# tests, PYTEST_WORKERS processes), the torch 2.1 one (its stack tests,
# then the Slurm test) and the onedl one (its stack tests), these two in
# one worker process each. Run one after the other, the stacks' suites
# waited for the pinned one, and the last file of each suite left a core
# idle: all at once, both cores stay busy until the end. The pins of the
# two other environments install while the project environment installs
# and lint runs, with apt-get's Slurm install; the editable installs of
# the checkout one after the other (each rewrites the checkout's
# t2t_plugin.egg-info, which openmim reads in the pinned suite's mim
# tests, and two at once in one environment would race), the pinned
# suite once all are done. Each suite's output comes when it ends.
# The suite's processes write the .pyc files of what they import, once,
# into the environments and the checkout: where PYTHONDONTWRITEBYTECODE
# is set, installing would compile all 13,000-17,000 files of each
# environment (about 55 CPU-s each here; tools/install/uv_install.py),
# and the suite imports a third of them. make test took 695 s, against
# 776 s with the environments compiled.
test: export PYTHONDONTWRITEBYTECODE :=
test:
	$(MAKE) --no-print-directory -j4 --output-sync=target STACK_WORKERS=1 \
		DENSE_AFTER=install-tests OLD_INSTALL_AFTER=install-dense \
		ONEDL_INSTALL_AFTER='$(OLD_VENV)/installed slurm-packages' \
		PINNED_AFTER='lint install-dense $(OLD_VENV)/installed $(ONEDL_VENV)/installed' \
		pinned-suite test-torch2.1-then-slurm test-onedl

# The suite, the tests of the research code in projects/ (run by make test
# as the product's are) and those of the contributors' scripts that run
# unattended: the GPU check (its CPU dry run; a lent GPU's minutes are too
# few to find a broken script) and the first-second benchmark. The other
# scripts' tests (about a minute more): make test-dev-scripts.
PROJECT_TESTS := projects/small_data/tests
DEV_SCRIPT_TESTS := .dev_scripts/tests/test_gpu_check.py \
	.dev_scripts/tests/test_first_second.py

test-pinned: install-tests install-dense
	@$(MAKE) --no-print-directory pinned-suite

# The pinned suite without its installs (make test installs first);
# after PINNED_AFTER.
PINNED_AFTER ?=
pinned-suite: | $(PINNED_AFTER)
	$(call PYTEST,$(PYTHON),$(PYTEST_WORKERS)) tests $(PROJECT_TESTS) \
		$(DEV_SCRIPT_TESTS) -m 'not slurm' $(PYTEST_ARGS)

# What the other two stacks run: the tests of the parts that call into
# torch, mmengine and mmpretrain, whose behaviour differs between their
# releases (model maths and load hooks, the Runner with our hooks, seeded
# loaders, checkpoint reading, datasets, mmpretrain's APIs, the training
# and test tools, mim), without the mmdet/mmseg, slow and Slurm ones. The
# configs, docs, deployment, packaging and tool-argument tests read or
# check files the same way on every stack and run on the pinned one only.
STACK_TESTS := tests/test_models tests/test_runtime tests/test_datasets \
	tests/test_apis/test_inference.py tests/test_converters/test_official.py \
	tests/test_tools/test_training.py tests/test_tools/test_test_tool_outputs.py \
	tests/test_configs/test_custom_data.py tests/test_packaging.py \
	$(PROJECT_TESTS)
STACK_MARKS := 'not dense and not slurm and (not slow or mim)'

# The pins first, the checkout once OLD_INSTALL_AFTER is made (make test:
# the project environment's last editable install).
OLD_INSTALL = $(call UV_INSTALL,$(OLD_VENV)/bin/python) $(OLD_PINS) pytest \
	$(XDIST_PIN) wheel
OLD_INSTALL_AFTER ?=
$(OLD_VENV)/pins: Makefile | $(OLD_VENV)/bin/python
	$(OLD_VENV)/bin/python -c 'import torch' 2>/dev/null || \
		$(NEED_SPACE) $(OLD_VENV) $(OLD_VENV_GB) "the torch 2.1 environment $(OLD_VENV)"
	$(OLD_INSTALL)
	touch $@

$(OLD_VENV)/installed: $(OLD_VENV)/pins setup.py | $(OLD_INSTALL_AFTER)
	$(OLD_INSTALL) -e '.[openmmlab]'
	touch $@

# The --out forms of the test tool are left out: mmengine's and
# mmpretrain's dumping, whose releases here are the pinned stack's.
test-torch2.1: $(OLD_VENV)/installed
	$(call PYTEST,$(OLD_VENV)/bin/python,$(STACK_WORKERS)) \
		$(filter-out tests/test_tools/test_test_tool_outputs.py,$(STACK_TESTS)) \
		-m $(STACK_MARKS) $(PYTEST_ARGS)

# torch comes from the registry (or the local disk it mirrors), the two
# source distributions from uv's cache once built. The onedl environment
# keeps a PEP 660 editable install: onedl-mim reads it
# (`mim train t2t-plugin configs/NAME.py`; given a name only, it searches
# the whole checkout, work_dirs and environments included). The pins
# install first; the checkout, with the rest of its requirements, once
# ONEDL_INSTALL_AFTER is made (make test: the torch 2.1 install, which
# rewrites the same egg-info), so that the downloads and builds of both
# environments run at once.
ONEDL_INSTALL = $(call UV_INSTALL,$(ONEDL_VENV)/bin/python) $(ONEDL_PINS) \
	$(ONEDL_MIM_PIN) $(XDIST_PIN) pytest wheel
ONEDL_INSTALL_AFTER ?=
$(ONEDL_VENV)/pins: Makefile | $(ONEDL_VENV)/bin/python
	$(ONEDL_VENV)/bin/python -c 'import torch' 2>/dev/null || \
		$(NEED_SPACE) $(ONEDL_VENV) $(ONEDL_VENV_GB) "the onedl environment $(ONEDL_VENV)"
	$(ONEDL_INSTALL)
	touch $@

$(ONEDL_VENV)/installed: $(ONEDL_VENV)/pins setup.py | $(ONEDL_INSTALL_AFTER)
	$(ONEDL_INSTALL) -e '.[onedl,tests]'
	touch $@

# The fast paths of the model (fused attention, torch.compile, activation
# checkpointing) are left out: torch's alone, and this stack's torch is
# the pinned one.
test-onedl: $(ONEDL_VENV)/installed
	$(call PYTEST,$(ONEDL_VENV)/bin/python,$(STACK_WORKERS)) $(STACK_TESTS) \
		-m $(STACK_MARKS) --ignore tests/test_models/test_fast_paths.py \
		$(PYTEST_ARGS)

# Slurm (slurmctld, slurmd, munge) on this machine, started by the test
# itself; it skips in one line where it cannot run (not root, no apt-get).
SLURM_PACKAGES = if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		! command -v slurmctld >/dev/null; then \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q slurm-wlm munge; } || \
		echo "apt-get could not install slurm-wlm and munge: the Slurm test skips"; fi
SLURM_TEST = $(1) -m pytest tests/test_tools/test_slurm.py -rsP $(PYTEST_ARGS)
slurm-packages:
	@$(SLURM_PACKAGES)

test-slurm: install-tests slurm-packages
	$(call SLURM_TEST,$(PYTHON))

# make test's torch 2.1 side: there the Slurm jobs run on the stack of GPU
# clusters with mmdet/mmseg (prebuilt CUDA mmcv needs torch 2.1), and
# start faster than on the pinned one, which imports mmdet (9 s less).
test-torch2.1-then-slurm: test-torch2.1 slurm-packages
	$(call SLURM_TEST,$(OLD_VENV)/bin/python)

lint: install-tests
	$(PYTHON) -m ruff check t2t_plugin t2t_preflight tools tests configs setup.py .dev_scripts projects
	$(PYTHON) -m ruff format --check t2t_plugin t2t_preflight tools tests configs setup.py .dev_scripts projects

# The demo installs only into the project's own .venv. An environment it
# did not create (the active one, or PYTHON=...) is used as it is when it
# has what the demo imports (the checkout's t2t_plugin comes from the
# checkout), else one line names what is missing; DEMO_INSTALL=1 allows
# `install` there (the pinned torch would replace, e.g., a GPU user's
# torch 2.1).
ifneq ($(or $(MAKE_VENV),$(filter 1,$(DEMO_INSTALL))),)
DEMO_ENV := install
else
DEMO_ENV := demo-env
endif

demo: $(DEMO_ENV)
	$(PYTHON) tools/demo.py

demo-env:
	@$(PYTHON) tools/install/demo_env.py "$(PYTHON_ORIGIN) ($(PYTHON))"

# On a GPU machine: benchmark, fp16 training, NCCL, compile, memory (< 8 min);
# a contributors' script (.dev_scripts/README.md).
# It checks the stack as installed (torch 2.1 with prebuilt mmcv, say):
# `install` would replace that torch with the pinned one.
gpu-check:
	@test -x $(PYTHON) || { echo "No Python at $(PYTHON): install first (make install, or docs/install.md for a GPU) or name one with PYTHON=..." >&2; exit 1; }
	PYTHON=$(PYTHON) bash .dev_scripts/gpu_check.sh

# For a GPU machine without a package registry that already has torch,
# numpy, opencv, matplotlib, rich, einops, scikit-learn, pyyaml, click and
# markdown: the pure-Python rest, 4 MB (docs/install.md, "GPU acceptance
# check"). importlib_metadata 9+ needs one more package; setuptools 81+
# has no pkg_resources, which mmengine reads `mmpretrain::` bases with.
GPU_WHEELS ?= $(CURDIR)/.gpu-wheels
GPU_PYTHON_VERSION ?= 3.12
GPU_WHEEL_PINS := mmengine==0.10.7 mmpretrain==1.2.0 mmcv-lite==2.1.0 \
	addict==2.4.0 yapf==0.43.0 platformdirs==4.14.9 termcolor==3.3.0 \
	mat4py==0.6.0 modelindex==0.0.2 model-index==0.1.11 ordered-set==4.1.0 \
	importlib_metadata==8.7.0 setuptools==80.9.0

gpu-wheels: $(MAKE_VENV)
	$(PIP) download --no-deps --only-binary=:all: \
		--python-version $(GPU_PYTHON_VERSION) -d $(GPU_WHEELS) $(GPU_WHEEL_PINS)
	@echo "Wheels for Python $(GPU_PYTHON_VERSION) in $(GPU_WHEELS); on the GPU machine:"
	@echo "  python3 -m pip install --no-index --no-deps --target /tmp/site $(notdir $(GPU_WHEELS))/*.whl"
	@echo "  PYTHONPATH=/tmp/site PYTHON=python3 bash .dev_scripts/gpu_check.sh"

# The tests of the contributors' scripts in .dev_scripts/ (the comparison
# benchmark and the GPU check's CPU dry run).
test-dev-scripts: install-tests
	$(PYTHON) -m pytest .dev_scripts/tests $(PYTEST_ARGS)

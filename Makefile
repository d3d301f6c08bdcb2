PYTHON ?= python3
PIP := $(PYTHON) -m pip
# The versions this project is tested with; setup.py holds the ranges.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
PYTEST_ARGS ?=

.PHONY: install install-tests install-dense test demo lint

install:
	$(PIP) install $(TORCH_PINS)
	@# full mmcv (installed by install-dense) and mmcv-lite provide the same package
	$(PYTHON) -c "import mmcv" 2>/dev/null || $(PIP) install 'mmcv-lite>=2.0,<2.2'
	$(PIP) install -e .

install-tests: install
	$(PIP) install -e '.[tests]'

install-dense: install
	PYTHON=$(PYTHON) bash tools/install/build_mmcv.sh
	$(PIP) install -e '.[dense]'

test: install-tests install-dense lint
	$(PYTHON) -m pytest tests $(PYTEST_ARGS)

lint:
	$(PYTHON) -m ruff check t2t_plugin tools tests configs setup.py

demo: install
	$(PYTHON) tools/demo.py

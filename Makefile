# Every target sets up .venv first, so each works on a fresh clone. `make serve` and `make build`
# install only what the site needs (requirements-site.txt: no torch, the build runs no project code);
# the other targets add the rest (requirements.txt). A stamp file per list remembers what is installed.
PYTHON ?= python3
# Material for MkDocs prints a notice on every build (9.7 about MkDocs 2.0, 9.8 about its end of life) unless this is set.
export NO_MKDOCS_2_WARNING := 1
VENV := .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check
SITE_STAMP := $(VENV)/.installed-site
STAMP := $(VENV)/.installed

.PHONY: serve serve-zh build test lint outputs bench gpu-check checker-versions lock check-lock test-site clean

# The supported Pythons, 3.$(OLDEST) to 3.$(NEWEST): those pyproject.toml's requires-python (">=3.10,<3.15") allows.
REQUIRES_PYTHON := $(shell sed -n 's/^requires-python = ">=3\.\([0-9]*\),<3\.\([0-9]*\)".*/\1 \2/p' pyproject.toml)
OLDEST := $(word 1,$(REQUIRES_PYTHON))
NEWEST := $(shell echo $$(($(word 2,$(REQUIRES_PYTHON)) - 1)))
SUPPORTED_PYTHONS := $(addprefix 3.,$(shell seq $(OLDEST) $(NEWEST)))
PYTHONS_TEXT := Python 3.$(OLDEST) to 3.$(NEWEST)

# Stops with one sentence when $(PYTHON) is missing or outside the range the pins install on.
define CHECK_PYTHON
import sys
if not (3, $(OLDEST)) <= sys.version_info[:2] <= (3, $(NEWEST)):
    sys.exit("make: $(PYTHON) is Python %s, but this project needs $(PYTHONS_TEXT): install one "
             "(python.org, your package manager, pyenv or uv) and run make again with PYTHON=/path/to/it." % sys.version.split()[0])
endef
export CHECK_PYTHON

# The venv counts only once it was created completely: a failed attempt is redone on the next run.
$(VENV)/.created:
	@command -v $(PYTHON) >/dev/null || { echo "make: no $(PYTHON) here: install $(PYTHONS_TEXT) and run make again with PYTHON=/path/to/it."; exit 1; }
	@$(PYTHON) -c "$$CHECK_PYTHON"
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	touch $@

$(SITE_STAMP): requirements-site.txt | $(VENV)/.created
	$(PIP_INSTALL) -r requirements-site.txt
	touch $@

$(STAMP): requirements.txt $(SITE_STAMP)
	$(PIP_INSTALL) -r requirements.txt
	touch $@

serve: $(SITE_STAMP)  ## serve on http://127.0.0.1:8000, rebuild on every change (problems are marked on the page)
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

serve-zh: $(SITE_STAMP)  ## the same for the Chinese edition (also on http://127.0.0.1:8000)
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000 --config-file mkdocs.zh.yml

build: $(SITE_STAMP)  ## strict build of both editions: English into site/, Chinese into site/zh/
	$(BIN)/mkdocs build --strict
	$(BIN)/mkdocs build --strict --config-file mkdocs.zh.yml

test: $(STAMP)  ## the whole test suite
	$(BIN)/python -m pytest

# For a Python with no torch wheel at hand (PyPI's Linux torch is the CUDA build, gigabytes): everything
# but torch, and the tests that run none of the pages' code (strict builds, the book, the notebooks' files).
test-site: $(SITE_STAMP)  ## the tests that need no torch, with PYTHON=/path/to/another/python
	grep -v '^torch==' requirements.txt > $(VENV)/without-torch.txt && $(PIP_INSTALL) -r $(VENV)/without-torch.txt
	$(BIN)/python -m pytest tests/test_site_build.py tests/test_book.py tests/test_notebooks.py tests/test_bench.py

lint: $(STAMP)  ## ruff, configured in pyproject.toml
	$(BIN)/ruff check

outputs: $(STAMP)  ## re-record every output, plot, notebook and DDP run after changing code (all or nothing); REPORT=FILE: the GPU outputs of a check-appendix-a.py report instead
	$(BIN)/python -m tools.record $(if $(REPORT),--report $(REPORT))

checker-versions: $(STAMP)  ## run check-appendix-a.py with this torch and with each PYTHONS="/path/to/python ..."; write measured/checker.json
	$(BIN)/python -m tools.checker versions $(BIN)/python $(PYTHONS)

bench: $(STAMP)  ## measure and write the figures the pages show; ARGS=--quick for a shorter run, ARGS=--help
	$(BIN)/python -m tools.bench $(ARGS)

gpu-check: $(STAMP)  ## on a machine with CUDA GPUs: DDP with NCCL against Gloo; records the GPU outputs
	$(BIN)/python -m tools.gpu_check

# One lock for every Python the project supports (uv's universal resolution writes environment
# markers where a newer release needs a newer Python), resolved by uv (pinned), which needs none of
# those Pythons. PyPI's Linux torch lists CUDA libraries that the CPU build does not need: left out.
UV := uv==0.13.9
LOCK_VENV := .lock-venv
CUDA_ONLY := ^(nvidia-|cuda-|triton==)
COMPILE := $(LOCK_VENV)/bin/uv pip compile --universal --python-version 3.$(OLDEST) --no-header --no-annotate --quiet
# Pure Python, but published as a source archive only: no wheel to look for.
SOURCE_ONLY := ^jieba==

$(LOCK_VENV)/bin/uv:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/python -m pip install --quiet $(UV)

lock: $(LOCK_VENV)/bin/uv  ## re-pin requirements.txt and requirements-site.txt from the .in files
	{ echo "# Generated by \`make lock\` from requirements.in: every package the site, the notebooks, the tests and the tools use."; \
	  $(COMPILE) requirements.in | grep -Ev '$(CUDA_ONLY)'; } > requirements.txt.new \
	  && mv requirements.txt.new requirements.txt || { rm -f requirements.txt.new; exit 1; }
	{ echo "# Generated by \`make lock\` from requirements-site.in: what \`make serve\` and \`make build\` need."; \
	  $(COMPILE) requirements-site.in -c requirements.txt; } > requirements-site.txt.new \
	  && mv requirements-site.txt.new requirements-site.txt || { rm -f requirements-site.txt.new; exit 1; }

# Asks the index, downloading no wheel (torch included), whether each pin has a wheel for Linux x86-64
# on every supported Python: a pin that would have to be built from source there fails.
check-lock: $(LOCK_VENV)/bin/uv  ## every pin has a wheel for each supported Python on Linux x86-64
	@grep -Ehv '$(SOURCE_ONLY)' requirements.txt requirements-site.txt > $(LOCK_VENV)/pins.txt
	@for version in $(SUPPORTED_PYTHONS); do \
	  $(LOCK_VENV)/bin/uv pip compile --quiet --no-deps --only-binary :all: --python-version $$version \
	    --python-platform x86_64-manylinux_2_28 $(LOCK_VENV)/pins.txt -o /dev/null \
	  || { echo "make: a pin has no wheel for Python $$version on Linux x86-64 (above): run make lock, or pin a release that has one."; exit 1; }; \
	  echo "check-lock: every pin has a wheel for Python $$version on Linux x86-64"; \
	done

clean:
	rm -rf site .pytest_cache

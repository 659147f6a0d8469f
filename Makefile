# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv when it is missing (or older than pyproject.toml or the lock file) and install
# the exact versions in requirements.lock; `make lock` regenerates it from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
# pip's warnings about the machine's extra package folders (pip.conf) are noise here; its errors still show.
NO_LOCATION_WARNINGS := 2>&1 | { grep -v "^WARNING: Location" || true; }
# The venv's packages are installed by uv (pinned below, itself from pip): with the same lock it installs in
# about 10 s what pip took about 3 minutes for, which is most of a fresh clone's `make demo` budget.
UV_PIN := uv==0.13.9
# --compile-bytecode: every installed module compiled once, at install (about 30 s on 2 cores). Python never
# writes .pyc files where PYTHONDONTWRITEBYTECODE is set (it is on the machines this was measured on), and
# Dagster's run workers are fresh processes: without it each one compiled Dagster, Great Expectations and
# plotly from source again (5-9 s of CPU a process), which cost the demo and the test suite minutes.
UV_INSTALL := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python
# Our own packages (an editable install) are compiled too; an edited module is recompiled as Python imports it.
COMPILE_OWN := $(BIN)/python -m compileall -q common redaction workloads replay endpoints warehouse assets pipelines
# Every package of the default install and the dev extra, pinned (pip constraints; the gpu extra is not in it).
LOCK := requirements.lock
LOCK_VENV := build/lock-venv
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test test-fast lint lock conformance aiconfigurator-compare dynamo-venv focus-check dagster sql notebook bench validate clean

# The package and what it runs with (all `make demo` needs).
$(STAMP): pyproject.toml $(LOCK)
	@# No pip in the venv (uv installs everything; ensurepip took 4-5 s): the system's pip puts uv there, or, where
	@# that pip is too old for --python (22.3+) or missing, the venv's own pip does.
	@test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@test -x $(BIN)/uv || $(PYTHON) -m pip --python $(BIN)/python install -q --disable-pip-version-check $(UV_PIN) \
	  $(NO_LOCATION_WARNINGS)
	@test -x $(BIN)/uv || { $(BIN)/python -m ensurepip > /dev/null && $(PIP) $(UV_PIN) $(NO_LOCATION_WARNINGS); }
	$(UV_INSTALL) -c $(LOCK) -e .
	$(COMPILE_OWN)
	@# Installed and findable (find_spec runs none of their code: importing all three took 6-7 s of a first run).
	$(BIN)/python -c "import importlib.util as u; assert all(u.find_spec(m) for m in ('dagster', 'duckdb', 'great_expectations'))"
	@touch $(STAMP)

# Plus what the tests need (pytest; dagster-k8s and dagster-postgres to check deploy/k8s; ruff, mypy).
$(DEV_STAMP): $(STAMP) $(LOCK)
	$(UV_INSTALL) -c $(LOCK) -e ".[dev]"
	@touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/costbench demo

# Three pytest workers, each taking whole test files (groups: tests/conftest.py; module fixtures stay one per file):
# many tests wait on real-time replays or process start-ups, so two workers left about a third of 2 cores idle.
# Measured on the 2-core box on 2026-12-07: two workers 1,035 and 1,048 s; three 737-799 s, where the real-router
# fleet's run failed runs_quality twice (its schedule lag p99 423 ms against the default 100 ms: the box's load, so
# test_pipelines_instance now gives its real-time scenarios a 1 s bound, as the PostgreSQL file does); then three,
# the real-time modules at nice -10 and the backfill test on a short chat window, 682 s (passed); four 700 s, with a
# 2.5 s process-exit bound missed under the load (test_sim_capacity_alongside). Later that day, a slower hour: three
# 983 s, then two 1,242 s. Handing the longest files out first was slower (980 s at three): the Dagster files then
# all run at once. With code servers and commands no longer importing dbt-core (assets/mart_assets.py), a clean-clone
# .ci/run: 983 s (passed); the suite beside nothing else an hour later, 1,110 s (user+sys 1,645 s: CPU-bound). Then
# the instance files left nice -10 (tests/conftest.py ahead_of_other_tests says why): their Dagster processes starved
# the other workers' tests past their timeouts. 2026-12-08 (a slower hour: the same import took 40% longer than the
# hour before), with the instance file on one code server and GX's distribution libraries deferred: a clean-clone
# .ci/run, pytest 853 s (passed). Four workers, in a run that also had SIGINT ignored (tests/conftest.py), were not
# done after 17.5 min.
# --durations: the 25 slowest tests, printed at the end, for whoever works on the suite's time.
test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup --durations=25

# The edit-test loop: the suite without its slow files (tests/conftest.py SLOW_FILES). `make test` stays the
# whole suite, and CI runs that.
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --fast

# Lint, format and type checks (config in pyproject.toml); .ci/run runs this beside `make test`. mypy checks the
# bench/, conformance/ and focus_check/ scripts too (each folder's files as top-level modules, as they import each
# other; sglang and torch, which only build/conformance-venv has, read as untyped).
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy common redaction workloads replay endpoints warehouse assets pipelines bench conformance focus_check

# The twin checked by SGLang's own code (conformance/, docs/twin.md "Conformance"): its own environment with
# sglang from PyPI and PyTorch's CPU build, every package pinned in conformance/requirements.txt and installed
# --no-deps by uv (about half a minute; rebuilt only when that file changes). The twin runs from .venv.
CONF_VENV := build/conformance-venv
CONF_STAMP := $(CONF_VENV)/.installed-stamp
CONF_REQS := conformance/requirements.txt
CONF_UV := $(UV_PIN)
# Where the CPU build of torch 2.13.0 lies (PyPI has CUDA builds only); this kind of machine ships it here.
# Elsewhere PyPI's torch 2.13.0 is installed instead, with the nvidia-* libraries it needs to import (3.5
# GB more, measured); it runs on a CPU all the same, and its torchvision extension loads, so no shim is needed.
TORCH_CPU_WHEELS ?= /opt/wheels
TORCH_PYPI := torch==2.13.0

$(CONF_STAMP): $(CONF_REQS) conformance/torchvision_cpu.py
	rm -rf $(CONF_VENV)
	$(PYTHON) -m venv $(CONF_VENV)
	$(CONF_VENV)/bin/python -m pip install -q --disable-pip-version-check $(CONF_UV) $(NO_LOCATION_WARNINGS)
	@site=$$($(CONF_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	uv="$(CONF_VENV)/bin/uv pip install -q --python $(CONF_VENV)/bin/python"; \
	if ls $(TORCH_CPU_WHEELS)/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then \
	  echo "conformance: torch 2.13.0+cpu from $(TORCH_CPU_WHEELS)"; \
	  $$uv --no-deps --find-links $(TORCH_CPU_WHEELS) -r $(CONF_REQS) && \
	  cp conformance/torchvision_cpu.py $$site/costbench_torchvision_cpu.py && \
	  echo "import costbench_torchvision_cpu" > $$site/costbench_torchvision_cpu.pth; \
	else \
	  echo "conformance: no CPU torch in $(TORCH_CPU_WHEELS); PyPI's $(TORCH_PYPI) (CUDA build, runs on a CPU)"; \
	  grep -v "^torch==" $(CONF_REQS) > $(CONF_VENV)/requirements-without-torch.txt && \
	  $$uv --no-deps -r $(CONF_VENV)/requirements-without-torch.txt && \
	  $$uv $(TORCH_PYPI); \
	fi
	@touch $(CONF_STAMP)

# Not part of `make test` (pyproject's testpaths is tests/); .ci/run runs it after `make test`. Offline:
# nothing may reach a model hub (bench_serving's tokenizer and dataset are local files the suite writes).
conformance: $(STAMP) $(CONF_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 COSTBENCH_TWIN_PYTHON=$(CURDIR)/$(BIN)/python \
	  $(CONF_VENV)/bin/python -m pytest conformance -q -p no:cacheprovider

# The twin beside NVIDIA's AIConfigurator (docs/twin.md "Beside a peer predictor"): its own environment with every
# package pinned in bench/aiconfigurator_requirements.txt, installed --no-deps by .venv's uv (rebuilt only when that
# file changes); bench/aiconfigurator_compare.py runs the twin from .venv and AIConfigurator's side in build/aic-venv.
# Not part of `make test` or .ci/run. AIC_ARGS=--quick: five of the points and a 300-request sweep.
AIC_VENV := build/aic-venv
AIC_STAMP := $(AIC_VENV)/.installed-stamp
AIC_REQS := bench/aiconfigurator_requirements.txt
AIC_ARGS ?=

$(AIC_STAMP): $(AIC_REQS) | $(STAMP)
	rm -rf $(AIC_VENV)
	$(PYTHON) -m venv --without-pip $(AIC_VENV)
	$(BIN)/uv pip install -q --compile-bytecode --python $(AIC_VENV)/bin/python --no-deps -r $(AIC_REQS)
	@touch $(AIC_STAMP)

aiconfigurator-compare: $(STAMP) $(AIC_STAMP)
	$(BIN)/python bench/aiconfigurator_compare.py --aic-python $(AIC_VENV)/bin/python $(AIC_ARGS)

# NVIDIA Dynamo's offline replay engine, timed beside the twin by bench/twin_engine_speed.py (its CPU seconds per 1,000
# simulated requests): its own environment with every package pinned in bench/dynamo_requirements.txt, installed
# --no-deps by .venv's uv (ai-dynamo's declared requirements include a stub that downloads from NVIDIA's index);
# rebuilt only when that file changes. bench/dynamo_replay.py runs in it. Not part of `make test` or .ci/run.
DYNAMO_VENV := build/dynamo-venv
DYNAMO_STAMP := $(DYNAMO_VENV)/.installed-stamp
DYNAMO_REQS := bench/dynamo_requirements.txt

$(DYNAMO_STAMP): $(DYNAMO_REQS) | $(STAMP)
	rm -rf $(DYNAMO_VENV)
	$(PYTHON) -m venv --without-pip $(DYNAMO_VENV)
	$(BIN)/uv pip install -q --compile-bytecode --python $(DYNAMO_VENV)/bin/python --no-deps -r $(DYNAMO_REQS)
	@touch $(DYNAMO_STAMP)

dynamo-venv: $(DYNAMO_STAMP)

# The FOCUS export checked by the FinOps Foundation's own validator (docs/warehouse.md, "The FOCUS export"): its own
# environment with focus-validator 2.2.1 (FOCUS 1.2), every package pinned in focus_check/requirements.txt and
# installed --no-deps by .venv's uv (what builds its two source-only packages pinned in focus_check/
# build_constraints.txt); rebuilt only when those files change. focus-validator 2.x needs Python 3.12 or newer:
# FOCUS_PYTHON, python3.12 by default (pyenv's shim takes PYENV_VERSION). focus_check/export_check.py replays three
# scenarios' first requests on the twin, writes the week's export and runs the validator on it and on a broken copy
# that must fail. .ci/run runs it after `make conformance`. Not compiled at install (--compile-bytecode took about
# 50 s here): the validator's first run compiles what it imports, and its second reuses it.
FOCUS_VENV := build/focus-venv
FOCUS_STAMP := $(FOCUS_VENV)/.installed-stamp
FOCUS_REQS := focus_check/requirements.txt
FOCUS_BUILD_CONSTRAINTS := focus_check/build_constraints.txt
FOCUS_PYTHON ?= python3.12

$(FOCUS_STAMP): $(FOCUS_REQS) $(FOCUS_BUILD_CONSTRAINTS) | $(STAMP)
	rm -rf $(FOCUS_VENV)
	PYENV_VERSION=3.12 $(FOCUS_PYTHON) -m venv --without-pip $(FOCUS_VENV)
	$(BIN)/uv pip install -q --python $(FOCUS_VENV)/bin/python --no-deps -r $(FOCUS_REQS) \
	  --build-constraints $(FOCUS_BUILD_CONSTRAINTS)
	@touch $(FOCUS_STAMP)

focus-check: $(STAMP) $(FOCUS_STAMP)
	$(BIN)/python focus_check/export_check.py --focus-venv $(FOCUS_VENV)

# Resolve pyproject.toml afresh (default + dev) in a throwaway venv and pin what it installed.
# Run after changing dependencies, or to take new releases on purpose; commit the result.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]" $(NO_LOCATION_WARNINGS)
	{ echo "# Generated by \`make lock\` from pyproject.toml (default + dev extra) with $$($(LOCK_VENV)/bin/python -V)."; \
	  echo "# Installed with pip's -c by \`make demo\`, \`make test\` and .ci/run. Do not edit by hand."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable --disable-pip-version-check; } > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)
	@echo "$(LOCK): $$(grep -c '==' $(LOCK)) pins"

# Dagster's UI on loopback, over the same instance the demo wrote to.
dagster: $(STAMP)
	@mkdir -p $(DAGSTER_HOME) && cp -n dagster.yaml $(DAGSTER_HOME)/dagster.yaml 2>/dev/null || true
	$(BIN)/dagster dev -h 127.0.0.1 -p 3000 -w workspace.yaml

# The DuckDB CLI (duckdb-cli, the pinned DuckDB's own) on the warehouse, read-only: COSTBENCH_WAREHOUSE, a
# folder (default warehouse/) or a ducklake:postgresql://... URL (its password from PGPASSWORD or ~/.pgpass);
# `python -m warehouse attach-sql` prints the lines that attach it (docs/warehouse.md). Queries can come on
# stdin: `make -s sql < warehouse/sql/example_cost_trend.sql`.
sql: $(STAMP)
	@lines="$$($(BIN)/python -m warehouse attach-sql)" && exec $(BIN)/duckdb -cmd "$$lines"

# The analyst's notebook (warehouse/notebook/analyst_notebook.py): marimo's editor on loopback, on the warehouse
# COSTBENCH_WAREHOUSE names (default warehouse/), read-only. Its front end is served from the marimo wheel and the
# update check is off, so it runs offline. The URL it prints carries the session's token; a browser opens only
# where there is a display (NOTEBOOK_FLAGS= opens one anyway, --headless never).
NOTEBOOK_PORT ?= 2718
NOTEBOOK_FLAGS ?= $(if $(DISPLAY)$(WAYLAND_DISPLAY),,$(if $(filter Darwin,$(shell uname -s)),,--headless))
notebook: $(STAMP)
	exec $(BIN)/marimo edit warehouse/notebook/analyst_notebook.py --host 127.0.0.1 --port $(NOTEBOOK_PORT) \
	  --skip-update-check --no-sandbox $(NOTEBOOK_FLAGS)

# The scenarios and endpoints files as the pipeline reads them, every trace resolving; then Dagster's own check.
validate: $(STAMP)
	$(BIN)/costbench validate
	$(BIN)/dagster definitions validate -w workspace.yaml

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .dagster_home warehouse/lake warehouse/runs warehouse/workloads warehouse/costbench.duckdb*

# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv when it is missing (or older than pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test dagster bench validate clean

# The package and what it runs with (all `make demo` needs).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e . 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -c "import dagster, duckdb, great_expectations"
	@touch $(STAMP)

# Plus what the tests need (pytest; dagster-k8s and dagster-postgres to check deploy/k8s).
$(DEV_STAMP): $(STAMP)
	$(PIP) -e ".[dev]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	@touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/costbench demo

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

# Dagster's UI on loopback, over the same instance the demo wrote to.
dagster: $(STAMP)
	@mkdir -p $(DAGSTER_HOME) && cp -n dagster.yaml $(DAGSTER_HOME)/dagster.yaml 2>/dev/null || true
	$(BIN)/dagster dev -h 127.0.0.1 -p 3000 -w workspace.yaml

validate: $(STAMP)
	$(BIN)/dagster definitions validate -w workspace.yaml

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .dagster_home warehouse/lake warehouse/runs warehouse/costbench.duckdb*

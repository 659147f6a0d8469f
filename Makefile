# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv when it is missing (or older than pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test dagster bench validate clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -c "import dagster, duckdb, great_expectations"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/costbench demo

test: $(STAMP)
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

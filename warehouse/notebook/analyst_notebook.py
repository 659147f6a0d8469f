"""The analyst's notebook: `make notebook` opens it in marimo's editor, on the warehouse, read-only.

Each of the docs' example questions (warehouse/sql/example_*.sql, read from the files as they are now) is an
editable query with its answer and, for the cost trend and the cache hit rate against cost, a plot of it. Edit a
query and its answer and plot follow; the files are not changed. The warehouse is `--warehouse LOCATION` after
`--` (`marimo edit analyst_notebook.py -- --warehouse DIR`), else $COSTBENCH_WAREHOUSE, else the repository's
warehouse/ (docs/warehouse.md "An analyst's notebook")."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="costbench: the analyst's notebook", sql_output="pandas")

with app.setup:
    import marimo as mo

    from warehouse.notebook.example_questions import example_question
    from warehouse.notebook.notebook_plots import (
        CACHE_VS_COST_COLUMNS,
        COST_TREND_COLUMNS,
        cache_vs_cost_figure,
        cost_trend_figure,
        missing_columns,
    )
    from warehouse.notebook.read_only_connection import NotebookWarehouseError, open_read_only


@app.cell
def title():
    mo.md(
        "# The warehouse, read-only\n\n"
        "The example questions of docs/warehouse.md, each an editable query over the warehouse with its answer; "
        "the files in warehouse/sql/ stay as they are. A write fails here: the connection is read-only, and it "
        "never holds up a refresh or another reader. It reads the database it opened; restart the kernel to see "
        "what a later refresh built."
    )
    return


@app.cell
def connection():
    try:
        _location = mo.cli_args().get("warehouse")
        # Kept as a global: its connection stays open while the notebook holds it.
        read_only = open_read_only(None if _location is None else str(_location))
    except NotebookWarehouseError as _why:
        mo.stop(True, mo.md(str(_why)).callout(kind="warn"))
    con = read_only.connection
    mo.md(f"Reading `{read_only.location}`, read-only.")
    return con, read_only


@app.cell
def cost_trend_question():
    _question = example_question("example_cost_trend.sql")
    cost_trend_sql = mo.ui.code_editor(_question.sql, language="sql", min_height=120)
    mo.vstack([mo.md(_question.markdown), cost_trend_sql])
    return (cost_trend_sql,)


@app.cell
def cost_trend_answer(con, cost_trend_sql):
    cost_trend = mo.sql(cost_trend_sql.value, engine=con)
    return (cost_trend,)


@app.cell
def cost_trend_plot(cost_trend):
    _why = missing_columns(cost_trend, COST_TREND_COLUMNS)
    mo.md(_why) if _why else cost_trend_figure(cost_trend)
    return


@app.cell
def regressed_week_question():
    _question = example_question("example_regressed_week.sql")
    regressed_week_sql = mo.ui.code_editor(_question.sql, language="sql", min_height=120)
    mo.vstack([mo.md(_question.markdown), regressed_week_sql])
    return (regressed_week_sql,)


@app.cell
def regressed_week_answer(con, regressed_week_sql):
    regressed_week = mo.sql(regressed_week_sql.value, engine=con)
    return (regressed_week,)


@app.cell
def cache_vs_cost_question():
    _question = example_question("example_cache_vs_cost.sql")
    cache_vs_cost_sql = mo.ui.code_editor(_question.sql, language="sql", min_height=120)
    mo.vstack([mo.md(_question.markdown), cache_vs_cost_sql])
    return (cache_vs_cost_sql,)


@app.cell
def cache_vs_cost_answer(cache_vs_cost_sql, con):
    cache_vs_cost = mo.sql(cache_vs_cost_sql.value, engine=con)
    return (cache_vs_cost,)


@app.cell
def cache_vs_cost_plot(cache_vs_cost):
    _why = missing_columns(cache_vs_cost, CACHE_VS_COST_COLUMNS)
    mo.md(_why) if _why else cache_vs_cost_figure(cache_vs_cost)
    return


@app.cell
def reasoning_tax_question():
    _question = example_question("example_reasoning_tax.sql")
    reasoning_tax_sql = mo.ui.code_editor(_question.sql, language="sql", min_height=120)
    mo.vstack([mo.md(_question.markdown), reasoning_tax_sql])
    return (reasoning_tax_sql,)


@app.cell
def reasoning_tax_answer(con, reasoning_tax_sql):
    reasoning_tax = mo.sql(reasoning_tax_sql.value, engine=con)
    return (reasoning_tax,)


@app.cell
def self_host_vs_api_question():
    _question = example_question("example_self_host_vs_api.sql")
    self_host_vs_api_sql = mo.ui.code_editor(_question.sql, language="sql", min_height=120)
    mo.vstack([mo.md(_question.markdown), self_host_vs_api_sql])
    return (self_host_vs_api_sql,)


@app.cell
def self_host_vs_api_answer(con, self_host_vs_api_sql):
    self_host_vs_api = mo.sql(self_host_vs_api_sql.value, engine=con)
    return (self_host_vs_api,)


if __name__ == "__main__":
    app.run()

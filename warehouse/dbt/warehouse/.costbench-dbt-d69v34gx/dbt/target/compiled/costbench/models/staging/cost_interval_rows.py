"""The week's 95% intervals (warehouse/marts/bootstrap_interval.py), one row per weekly_trends grain, untyped:
cost_intervals types and documents them. Reads run_summary and the lake's requests (sql/interval_blocks.sql)."""

import pyarrow as pa

from warehouse.marts.bootstrap_interval import INTERVAL_COLUMNS, interval_rows
from warehouse.sql_files import read_sql


def model(dbt, session):
    dbt.ref("run_summary")  # what interval_blocks.sql reads, named for the lineage
    dbt.source("warehouse", "requests")
    rows = interval_rows(session, read_sql("sql/interval_blocks.sql"))
    return pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(INTERVAL_COLUMNS)})


# This part is user provided model code
# you will need to copy the next section to run the code
# COMMAND ----------
# this part is dbt logic for get ref work, do not modify


def ref(*args, **kwargs):
    refs = {"run_summary": '"costbench"."main"."run_summary"'}
    key = ".".join(args)
    version = kwargs.get("v") or kwargs.get("version")
    if version:
        key += f".v{version}"
    dbt_load_df_function = kwargs.get("dbt_load_df_function")
    return dbt_load_df_function(refs[key])


def source(*args, dbt_load_df_function):
    sources = {"warehouse.requests": '"costbench"."main"."requests"'}
    key = ".".join(args)
    return dbt_load_df_function(sources[key])


config_dict = {}
meta_dict = {}


class config:
    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def get(key, default=None):
        return config_dict.get(key, default)

    @staticmethod
    def meta_get(key, default=None):
        return meta_dict.get(key, default)


class this:
    """dbt.this() or dbt.this.identifier"""

    database = "costbench"
    schema = "staging"
    identifier = "cost_interval_rows"

    def __repr__(self):
        return '"costbench"."staging"."cost_interval_rows"'


class dbtObj:
    def __init__(self, load_df_function) -> None:
        self.source = lambda *args: source(*args, dbt_load_df_function=load_df_function)
        self.ref = lambda *args, **kwargs: ref(*args, **kwargs, dbt_load_df_function=load_df_function)
        self.config = config
        self.this = this()
        self.is_incremental = False


# COMMAND ----------

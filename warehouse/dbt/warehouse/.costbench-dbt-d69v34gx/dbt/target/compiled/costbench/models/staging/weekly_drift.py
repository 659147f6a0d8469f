"""The weekly_trends rows that drifted (warehouse/marts/change_points.py): each one's key and what the drift sets
there. weekly_trends applies them to weekly_trends_undrifted, whose verdicts they read."""

import pyarrow as pa

from warehouse.marts.change_points import DRIFT_COLUMNS, drift_rows


def model(dbt, session):
    dbt.ref("weekly_trends_undrifted").create_view("weekly_trends_undrifted_rows", replace=True)
    rows = drift_rows(session, "weekly_trends_undrifted_rows")
    return pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(DRIFT_COLUMNS)})


# This part is user provided model code
# you will need to copy the next section to run the code
# COMMAND ----------
# this part is dbt logic for get ref work, do not modify


def ref(*args, **kwargs):
    refs = {"weekly_trends_undrifted": '"costbench"."staging"."weekly_trends_undrifted"'}
    key = ".".join(args)
    version = kwargs.get("v") or kwargs.get("version")
    if version:
        key += f".v{version}"
    dbt_load_df_function = kwargs.get("dbt_load_df_function")
    return dbt_load_df_function(refs[key])


def source(*args, dbt_load_df_function):
    sources = {}
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
    identifier = "weekly_drift"

    def __repr__(self):
        return '"costbench"."staging"."weekly_drift"'


class dbtObj:
    def __init__(self, load_df_function) -> None:
        self.source = lambda *args: source(*args, dbt_load_df_function=load_df_function)
        self.ref = lambda *args, **kwargs: ref(*args, **kwargs, dbt_load_df_function=load_df_function)
        self.config = config
        self.this = this()
        self.is_incremental = False


# COMMAND ----------

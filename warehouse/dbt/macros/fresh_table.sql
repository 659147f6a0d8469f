{#- fresh_table: a model's table in a database the refresh has just created (warehouse/marts/dbt_build.py), in one
    statement pair: CREATE TABLE with the YAML's columns (its data_type, NOT NULL where the YAML's constraints say
    not_null), then INSERT BY NAME the model's rows, which casts each to its column's type. dbt's own `table`
    creates a temporary relation and renames it over the old one, four or five statements a model: here nothing
    is there to replace, and the whole file is swapped in only when every model and test passed. A model without
    YAML columns is created from its SELECT. -#}
{% materialization fresh_table, adapter="duckdb", supported_languages=["sql"] %}
  {{ return(table_from(typed_table(this.incorporate(type="table"), sql))) }}
{% endmaterialization %}

{#- The model's table made by `statements` (its main statement, between the model's hooks), committed: what
    fresh_table and week_table return. -#}
{% macro table_from(statements) -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% call statement("main") -%}
    {{ statements }}
  {%- endcall %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({"relations": [this.incorporate(type="table")]}) }}
{%- endmacro %}

{#- The table `relation` holding the rows of `select`: typed by the model's YAML columns when it has them (CREATE,
    then INSERT BY NAME), else created from the SELECT. -#}
{% macro typed_table(relation, select) -%}
  {%- set columns = model.columns.values() | list -%}
  {%- if columns %}
    CREATE OR REPLACE TABLE {{ relation }} (
      {%- for column in columns %}
      {{ column.name }} {{ column.data_type }}
      {%- if column.constraints | selectattr("type", "equalto", "not_null") | list %} NOT NULL{% endif %}
      {{- "," if not loop.last }}
      {%- endfor %}
    );
    INSERT INTO {{ relation }} BY NAME
    {{ select }}
  {%- else %}
    CREATE OR REPLACE TABLE {{ relation }} AS
    {{ select }}
  {%- endif %}
{%- endmacro %}

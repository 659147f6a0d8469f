{#- fresh_table: a model's table in a database the refresh has just created (warehouse/marts/dbt_build.py), in one
    statement pair: CREATE TABLE with the YAML's columns (its data_type, NOT NULL where the YAML's constraints say
    not_null), then INSERT BY NAME the model's rows, which casts each to its column's type. dbt's own `table`
    creates a temporary relation and renames it over the old one, four or five statements a model: here nothing
    is there to replace, and the whole file is swapped in only when every model and test passed. A model without
    YAML columns is created from its SELECT. -#}
{% materialization fresh_table, adapter="duckdb", supported_languages=["sql"] %}
  {%- set target_relation = this.incorporate(type="table") -%}
  {%- set columns = model.columns.values() | list -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% call statement("main") -%}
    {%- if columns %}
    CREATE OR REPLACE TABLE {{ target_relation }} (
      {%- for column in columns %}
      {{ column.name }} {{ column.data_type }}
      {%- if column.constraints | selectattr("type", "equalto", "not_null") | list %} NOT NULL{% endif %}
      {{- "," if not loop.last }}
      {%- endfor %}
    );
    INSERT INTO {{ target_relation }} BY NAME
    {{ sql }}
    {%- else %}
    CREATE OR REPLACE TABLE {{ target_relation }} AS
    {{ sql }}
    {%- endif %}
  {%- endcall %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({"relations": [target_relation]}) }}
{% endmaterialization %}

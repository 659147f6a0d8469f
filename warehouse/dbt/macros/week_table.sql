{#- week_table: a model whose every row belongs to one week (a column week_start) and is computed from that week's
    rows alone, so a refresh can rebuild some weeks and keep the others (docs/warehouse.md, "A week at a time").

    Built in full (as fresh_table) unless the refresh passes the vars `rebuild_weeks` (ISO dates, maybe none) and
    `previous_database` (the attached database the last build published): then the table is the previous build's
    rows of every other week, copied, and the model's rows of those weeks. The refresh decides when the previous
    rows are still right (warehouse/marts/week_scope.py): same project, schema and prices, so each kept week's rows
    are what a full build would compute. The model's SELECT is filtered here, after it, so a model cannot add a
    row of a week it was not asked for; DuckDB pushes the filter down to the lake's week partitions. -#}
{% materialization week_table, adapter="duckdb", supported_languages=["sql"] %}
  {%- set target_relation = this.incorporate(type="table") -%}
  {%- set weeks = var("rebuild_weeks", none) -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% call statement("main") -%}
    {%- if weeks is none %}
    {{ typed_table(target_relation, sql) }}
    {%- else %}
    {%- set previous = var("previous_database") ~ "." ~ this.schema ~ "." ~ this.identifier %}
    {%- set listed = [] %}
    {%- for week in weeks %}{% do listed.append("DATE '" ~ week ~ "'") %}{% endfor %}
    {%- set kept = "SELECT * FROM " ~ previous %}
    {%- if listed %}{% set kept = kept ~ " WHERE week_start NOT IN (" ~ listed | join(", ") ~ ")" %}{% endif %}
    {{ typed_table(target_relation, kept) }};
    {%- if listed %}
    INSERT INTO {{ target_relation }} BY NAME
    SELECT * FROM (
    {{ sql }}
    ) WHERE week_start IN ({{ listed | join(", ") }})
    {%- endif %}
    {%- endif %}
  {%- endcall %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({"relations": [target_relation]}) }}
{% endmaterialization %}

{#- `column` IN the weeks a week_table build computes (TRUE in a full build): for a model whose plan DuckDB cannot push
    week_table's own filter through (an outer join, an unnest), on each scan of the lake. -#}
{% macro in_rebuilt_weeks(column) -%}
  {%- set weeks = var("rebuild_weeks", none) -%}
  {%- if weeks is none -%}
    TRUE
  {%- elif weeks -%}
    {{ column }} IN ({% for week in weeks %}DATE '{{ week }}'{{ ", " if not loop.last }}{% endfor %})
  {%- else -%}
    FALSE
  {%- endif -%}
{%- endmacro %}

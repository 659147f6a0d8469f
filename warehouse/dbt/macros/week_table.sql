{#- week_table: a model whose every row belongs to one week (a column week_start) and is computed from that week's
    rows alone, so a refresh can rebuild some weeks and keep the others (docs/warehouse.md, "A week at a time").

    Built in full (as fresh_table) unless the refresh passes the vars `rebuild_weeks` (ISO dates, maybe none) and
    `previous_database` (the attached database the last build published): then the table is the previous build's
    rows of every other week, copied, and the model's rows of those weeks. The refresh decides when the previous
    rows are still right (warehouse/marts/week_scope.py): the same inputs besides the lake, so each kept week's rows
    are what a full build would compute. The model's SELECT is filtered here, after it, so a model cannot add a
    row of a week it was not asked for; DuckDB pushes the filter down to the lake's week partitions. -#}
{% materialization week_table, adapter="duckdb", supported_languages=["sql"] %}
  {%- set target_relation = this.incorporate(type="table") -%}
  {%- set weeks = rebuilt_weeks() -%}
  {%- if weeks is none -%}
    {%- set statements = typed_table(target_relation, sql) -%}
  {%- else -%}
    {%- set kept = "SELECT * FROM " ~ var("previous_database") ~ "." ~ this.schema ~ "." ~ this.identifier -%}
    {%- if weeks %}{% set kept = kept ~ " WHERE week_start NOT IN (" ~ weeks | join(", ") ~ ")" %}{% endif -%}
    {%- set statements = typed_table(target_relation, kept) ~ ";" -%}
    {%- if weeks -%}
      {%- set statements = statements ~ "\nINSERT INTO " ~ target_relation ~ " BY NAME SELECT * FROM (\n" ~ sql
          ~ "\n) WHERE week_start IN (" ~ weeks | join(", ") ~ ")" -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(table_from(statements)) }}
{% endmaterialization %}

{#- The weeks a week_table build computes, as SQL date literals; none in a full build. -#}
{% macro rebuilt_weeks() -%}
  {%- set weeks = var("rebuild_weeks", none) -%}
  {%- if weeks is none %}{{ return(none) }}{% endif -%}
  {%- set listed = [] -%}
  {%- for week in weeks %}{% do listed.append("DATE '" ~ week ~ "'") %}{% endfor -%}
  {{ return(listed) }}
{%- endmacro %}

{#- `column` IN the weeks a week_table build computes (TRUE in a full build): for a model whose plan DuckDB cannot push
    week_table's own filter through (an outer join, an unnest), on each scan of the lake. -#}
{% macro in_rebuilt_weeks(column) -%}
  {%- set weeks = rebuilt_weeks() -%}
  {%- if weeks is none -%}
    TRUE
  {%- elif weeks -%}
    {{ column }} IN ({{ weeks | join(", ") }})
  {%- else -%}
    FALSE
  {%- endif -%}
{%- endmacro %}

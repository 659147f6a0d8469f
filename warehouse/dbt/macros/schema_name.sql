{#- A model's schema is the one it names (staging, team), else the target's (main): not dbt's default
    <target>_<name>, so analysts find the marts in main and the stages in staging. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {{ custom_schema_name | trim if custom_schema_name else target.schema }}
{%- endmacro %}

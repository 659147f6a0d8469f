{#- The YAML columns of the model (or of the model `of`: a stage typed as the mart it becomes), each cast to its
    data_type, in the YAML's order: a mart's SELECT ends with this, so its contract (the YAML) decides every column's
    type, as INSERT BY NAME into a typed table did. -#}
{% macro contract_columns(of=none) -%}
    {%- set columns = graph.nodes["model.costbench." ~ of].columns if (of and execute) else model.columns -%}
    {%- for column in columns.values() %}
    CAST({{ column.name }} AS {{ column.data_type }}) AS {{ column.name }}{{ "," if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#- Generic tests the marts' YAML uses, written here (the project installs no dbt package). -#}

{#- unique_key: no two rows share the key `columns` (a null is a value here: a grain's unrecorded fingerprint). -#}
{% test unique_key(model, columns) %}
SELECT {{ columns | join(", ") }}, count(*) AS rows_with_the_key
FROM {{ model }}
GROUP BY ALL
HAVING count(*) > 1
{% endtest %}

{#- one_row_each: the model has exactly one row for each row of `compare` (the same `column` values, each once). -#}
{% test one_row_each(model, column_name, compare) %}
SELECT coalesce(m.{{ column_name }}, c.{{ column_name }}) AS {{ column_name }}, m.n AS rows_here, c.n AS rows_there
FROM (SELECT {{ column_name }}, count(*) AS n FROM {{ model }} GROUP BY ALL) AS m
FULL JOIN (SELECT {{ column_name }}, count(*) AS n FROM {{ compare }} GROUP BY ALL) AS c USING ({{ column_name }})
WHERE m.n IS DISTINCT FROM 1 OR c.n IS DISTINCT FROM 1
{% endtest %}

{#- config_changes(before_fingerprint, now_fingerprint, before_facts, now_facts): a change of configuration in
words, the one spelling weekly_trends (the verdict's reasons) and cost_attribution (runtime_changes) share. The
arguments are SQL expressions (each used more than once, so plain column references). The facts are
runs.config_facts_json as JSON (what the fingerprint hashes); the result is a list with one
'<field>: <before> -> <now>' per fact that differs (`disable_radix_cache: false -> true`, 'null' for a fact one
side lacks), sorted by field; ['configuration: <before> -> <now>'] (the fingerprints) when the fingerprints differ
and no fact says how (facts not recorded); [] when the fingerprints are equal or either is null (not recorded: not
a change). -#}
{% macro config_changes(before_fingerprint, now_fingerprint, before_facts, now_facts) -%}
    (CASE WHEN {{ before_fingerprint }} <> {{ now_fingerprint }} THEN coalesce(
        nullif([
            format('{}: {} -> {}', k, coalesce(json_extract({{ before_facts }}, '$.' || k)::VARCHAR, 'null'),
                   coalesce(json_extract({{ now_facts }}, '$.' || k)::VARCHAR, 'null'))
            FOR k IN list_sort(list_distinct(json_keys({{ now_facts }}) || json_keys({{ before_facts }})))
            IF json_extract({{ now_facts }}, '$.' || k) IS DISTINCT FROM json_extract({{ before_facts }}, '$.' || k)
        ], []),
        [format('configuration: {} -> {}', {{ before_fingerprint }}, {{ now_fingerprint }})]
    ) ELSE [] END)
{%- endmacro %}

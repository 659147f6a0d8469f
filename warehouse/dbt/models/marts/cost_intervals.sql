-- cost_intervals: the Python stage's rows (models/staging/cost_interval_rows.py), typed by this model's contract.
SELECT {{ contract_columns() }}
FROM {{ ref('cost_interval_rows') }}

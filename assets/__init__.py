"""Dagster assets and asset checks, one module per stage, with the resources they take; thin wiring over
the library (workloads, replay, endpoints, warehouse)."""

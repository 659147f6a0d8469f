"""Traces to workloads. Rooms: readers/ (one reader per trace format and the strict parsing they share),
prompts/ (a row's exact prompt tokens and answer format); here: the canonical Workload and its Parquet file,
capture, scenarios.yaml and endpoints.yaml with their models, weekly windows and traffic."""

"""Runs carried out on a Dagster instance the way the schedule carries them out: its daemon, backfills and run
queue (instance_runs), and what keeps a command that uses an instance from leaving anything behind or sharing it
(stop_guard). The demo (demo/) and `costbench run` (run_weeks) are built on it."""

"""The `costbench` subcommands: capture, workload, replay, sim, demo, and their error handling."""

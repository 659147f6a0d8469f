"""The `costbench` subcommands: capture, workload, replay, sim (demo's is in pipelines/demo/), and their error
handling."""

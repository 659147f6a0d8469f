"""The top: Dagster's Definitions, schedule, sensors and the weekly job's executor (here), the `costbench`
CLI's subcommands (commands/) and the demo, which submits runs to a real instance (demo/)."""

"""`costbench demo`, its command and its run: a real Dagster instance, its daemon, submitted runs, and the story
it prints."""

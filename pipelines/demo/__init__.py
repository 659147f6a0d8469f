"""`costbench demo`: a real Dagster instance, its daemon, submitted runs, and the story it prints."""

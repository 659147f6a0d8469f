"""Trace readers, one per format behind a registry, and the strict JSON/CSV/JSONL parsing they share."""

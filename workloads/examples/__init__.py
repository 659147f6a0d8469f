"""Bundled examples: scenario files and the scripts that generate their synthetic traces."""

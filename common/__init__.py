"""Kernels every layer shares and that import nothing else of the project: atomic file writes, secret
redaction, typed column lists, strict YAML configuration files. Capped in size (tests/test_layering.py)."""

"""The published SGLang figures the twin is fitted and validated on, and its fit and validation tables."""

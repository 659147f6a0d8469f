"""Structured output in the twin: the request's constraint, grammar compile, the smallest conforming answer."""

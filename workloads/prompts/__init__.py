"""Turning a trace row into a prompt: exact token ids, shared prefixes, chat text, response formats."""

"""Secrets kept out of every file a run writes: redaction by a value's name (secret_redaction.py) and by its shape
(secret_shapes.py), applied to every text an endpoint sends before it is stored. Imports nothing else of the project;
every layer may use it."""

"""One client per backend behind a registry, and what they share: request bodies, SSE streams, answers."""

"""Token ids and counts for text, where a trace carries text but no (trusted) counts.

Two counters behind one Protocol:
- `ApproxTokenCounter` (the default, "approx-4-bytes"): the UTF-8 bytes in 4-byte pieces, each piece one
  "token" whose id is the piece read as a little-endian uint32 (the last piece zero-padded). About 4
  characters a token for English, deterministic, and the same everywhere (ShareGPT counts, capture
  hashes), so equal text prefixes give equal token prefixes. It is not the model's tokenizer.
- `FileTokenCounter` ("tokenizer:<file name>"): a Hugging Face `tokenizer.json`, read with the optional
  `tokenizers` package (not a default dependency: it pulls the Hub client with it). Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

APPROX_COUNTER_NAME = "approx-4-bytes"
APPROX_BYTES_PER_TOKEN = 4


class TokenCounter(Protocol):
    name: str  # recorded in Workload.token_counter

    def encode(self, text: str) -> np.ndarray:
        """Token ids of `text` (int64), with no special tokens added."""
        ...

    def count(self, text: str) -> int: ...


class ApproxTokenCounter:
    name = APPROX_COUNTER_NAME

    def encode(self, text: str) -> np.ndarray:
        data = text.encode("utf-8")
        padded = data + b"\0" * (-len(data) % APPROX_BYTES_PER_TOKEN)
        return np.frombuffer(padded, dtype="<u4").astype(np.int64)

    def count(self, text: str) -> int:
        return -(-len(text.encode("utf-8")) // APPROX_BYTES_PER_TOKEN)


class _Encoding(Protocol):
    @property
    def ids(self) -> list[int]: ...


class _Tokenizer(Protocol):
    """The part of `tokenizers.Tokenizer` used here."""

    def encode(self, sequence: str, *, add_special_tokens: bool = True) -> _Encoding: ...


class FileTokenCounter:
    def __init__(self, tokenizer: _Tokenizer, name: str) -> None:
        self._tokenizer = tokenizer
        self.name = name

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def load_token_counter(tokenizer_path: str | Path | None) -> TokenCounter:
    """The approximation when `tokenizer_path` is None, else a counter over that tokenizer.json.

    ValueError naming the file when it cannot be used (missing, unreadable, or `tokenizers` absent).
    """
    if tokenizer_path is None:
        return ApproxTokenCounter()
    path = Path(tokenizer_path)
    if not path.is_file():
        raise ValueError(f"{path}: tokenizer file not found")
    try:
        from tokenizers import Tokenizer  # optional: only this path needs it
    except ImportError:
        raise ValueError(
            f"{path}: reading a tokenizer file needs the optional `tokenizers` package "
            f"(pip install tokenizers); without a tokenizer, counts use the {APPROX_COUNTER_NAME} approximation"
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises its own exception type
        raise ValueError(f"{path}: not a usable tokenizer.json: {exc}") from None
    return FileTokenCounter(tokenizer, f"tokenizer:{path.name}")

"""Text prompts for the OpenAI backends, built from the materialized token ids before t0.

OpenAI endpoints take text, and no tokenizer ships with costbench, so token ids become words: each
id picks one three-letter lowercase word, written with a leading space. " cat" is 4 bytes, which is
exactly one token of the twin's toy tokenizer and one token of a typical BPE vocabulary, so the text
lands close to `input_tokens` on a real server and exactly on it on the twin. Equal id prefixes give
equal text prefixes, so the trace's prefix sharing still reaches the server's radix cache.
Exact token counts remain the native backend's job (input_ids); the OpenAI backends record what the
server reports next to what was asked.
"""

from __future__ import annotations

import numpy as np
import orjson

# 3-letter words, each 1 token in common BPE vocabularies when preceded by a space.
_WORDS = np.array(
    [
        f" {w}"
        for w in (
            "the and for are but not you all any can had her was one our out day get has him his how man new "
            "now old see two way who boy did its let put say she too use cat dog sun sea red big top end art "
            "car box cup bed map key pen job law oil war tax age air arm bag bit bus cut eye fee fit fly fun "
            "gas god gun hat hit ice lab leg lie lot low mix net nor odd owe pay pie pop raw row run sad set "
            "sit six sky son tea ten tie tip toe toy van web win yes yet zoo ask bad bar bet bid bow"
        ).split()
    ]
)


def text_for_ids(input_ids: np.ndarray) -> str:
    """One 4-byte word per id; deterministic in the ids."""
    return "".join(_WORDS[np.asarray(input_ids, dtype=np.int64) % len(_WORDS)].tolist())


def chat_messages(prompt: str | None, input_ids: np.ndarray) -> list[dict]:
    """The chat `messages` to send: the captured ones when the workload kept a JSON message list,
    else a single user turn holding the captured text or the text built from the ids."""
    if prompt:
        stripped = prompt.lstrip()
        if stripped.startswith("["):
            try:
                messages = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                messages = None
            if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
                return messages
        return [{"role": "user", "content": prompt}]
    return [{"role": "user", "content": text_for_ids(input_ids)}]


def completion_prompt(prompt: str | None, input_ids: np.ndarray) -> str:
    """The `/v1/completions` prompt: captured text (a message list is joined by content) or built text."""
    if prompt:
        messages = chat_messages(prompt, input_ids)
        return "\n".join(str(m.get("content") or "") for m in messages)
    return text_for_ids(input_ids)

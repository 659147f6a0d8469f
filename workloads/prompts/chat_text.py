"""One fixed text rendering of an OpenAI-style prompt (chat messages or a completion prompt).

Used to count and hash prompts whose server-side chat template is unknown. It is prefix-stable: the
rendering of a conversation's first k messages is a prefix of the rendering of its first k+1, so a later
turn's token sequence extends the earlier turn's and block hashes show the sharing.
"""

from __future__ import annotations

import orjson


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content parts: text as text; anything else (an image, audio) as its JSON, so it still counts.
        return "".join(
            part["text"]
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            else orjson.dumps(part, option=orjson.OPT_SORT_KEYS).decode()
            for part in content
        )
    return orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode()


def render_message(message: dict) -> str:
    text = f"<|{message.get('role', '')}|>\n{_content_text(message.get('content'))}"
    if message.get("tool_calls"):
        text += orjson.dumps(message["tool_calls"], option=orjson.OPT_SORT_KEYS).decode()
    return text + "\n"


def render_prompt(prompt: str | list[dict]) -> str:
    """A completion prompt as is; chat messages concatenated in order."""
    if isinstance(prompt, str):
        return prompt
    return "".join(render_message(message) for message in prompt)

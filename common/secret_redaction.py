"""Secrets out of what a server says about itself, before costbench stores any of it.

SGLang's /server_info echoes its ServerArgs, and releases have sent `api_key` and `admin_api_key`
among them; a router, a proxy or another build may add tokens, passwords or its environment. Every
server fact costbench keeps (run.json, server_facts.json, the `runs` table) goes through
`redact_secrets` first, whatever the server sent. It lives in `replay` because that is where the
first server answer enters the project (replay/clients/server_info_fetch.py) and `replay` may import no other
costbench package; `endpoints` and `warehouse` import it from here. Pure functions, no I/O.

The rule, by key name, applied recursively:
- A name is cut into words at `_`, `-`, `.`, spaces and lower-to-upper case changes (digits dropped);
  what matters is the **last** word, since a name ends in what it holds: `hf_token`, `admin_api_key`,
  `ssl_keyfile_password` and `apiKey` are secret; `speculative_token_map`, `tokenizer_path`,
  `ssl_keyfile` and `api_key_env` (a variable's name) are not.
- Last word key(s), apikey(s), secret(s), password(s), passwd, pwd, credential(s), authorization,
  cookie(s): every string and number under the name is replaced by "<redacted>", however deeply nested.
- Last word token: only strings are replaced (on a command line or in text: values that are not
  numbers). A token *count* is a number and is kept; `tokens` (plural: `max_total_num_tokens`,
  `max_prefill_tokens`) always counts and is not a secret name.
- An environment-like mapping or list (last word env, envs, environ, environment, or a name ending in
  env_vars / environment_variables): every string and number in it is replaced, since an environment
  holds secrets under any name. A plain string under such a name (`api_key_env: SGLANG_API_KEY`) is not
  an environment and is kept.
- Booleans, null and empty strings are kept everywhere: whether a key is set is a fact, not a secret.
- Every other string is scrubbed: `user:password@` in a URL, `Bearer <token>`, and `NAME=value`,
  `NAME: value` or `--name value` where NAME is secret by the rule above (query strings, command
  lines, a ServerArgs repr). A list of strings is read as a command line: after a secret `--flag` the
  next item is replaced, and `--flag=value` keeps only the flag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import IntEnum
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_STRONG_WORDS = frozenset(
    "key keys apikey apikeys secret secrets password passwords passwd pwd credential credentials "
    "authorization cookie cookies".split()
)
_TOKEN_WORDS = frozenset({"token"})
_ENV_WORDS = frozenset({"env", "envs", "environ", "environment"})
_ENV_TAILS = (("env", "vars"), ("environment", "variables"))
_KEPT_LITERALS = frozenset({"", "null", "None", "''", '""'})
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic)(?P<gap>\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"',;&?#)\]}]+)"
# `name=value`, `name: value`, `"name": "value"`; a colon needs a space or a quote after it, so
# `http://` and `host:port` are not assignments.
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[\"']?(?:\s*=\s*|:\s+|:(?=[\"'])))" + _VALUE)
_FLAG_VALUE = re.compile(r"(?P<name>--[A-Za-z][A-Za-z0-9_-]*)(?P<sep>\s+)" + _VALUE)


class _Kind(IntEnum):
    """How much under a name is hidden; nested names can only raise it."""

    PLAIN = 0
    TOKEN = 1  # strings
    SECRET = 2  # strings and numbers


def _words(name: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(name)]


@lru_cache(maxsize=4096)  # pure; a scrape asks for the same few label names every second
def _name_kind(name: str) -> _Kind:
    words = _words(name)
    if not words:
        return _Kind.PLAIN
    if words[-1] in _STRONG_WORDS:
        return _Kind.SECRET
    if words[-1] in _TOKEN_WORDS:
        return _Kind.TOKEN
    return _Kind.PLAIN


def _is_environment(name: str) -> bool:
    words = _words(name)
    return bool(words) and (words[-1] in _ENV_WORDS or any(tuple(words[-2:]) == tail for tail in _ENV_TAILS))


def is_secret_name(name: str) -> bool:
    """True when a value under `name` (a key, a flag without its dashes, a variable) is a secret."""
    return _name_kind(name) is not _Kind.PLAIN


def _hides_text_value(name: str, value: str) -> bool:
    """Whether the text `value` given for `name` (a flag, a query parameter) is a secret."""
    kind = _name_kind(name)
    if kind is _Kind.PLAIN or value in _KEPT_LITERALS:
        return False
    return kind is _Kind.SECRET or not _NUMBER.match(value)


def redact_secrets(value):
    """A copy of a JSON-like value (dicts, lists, scalars) with every secret replaced by REDACTED.

    Mappings stay mappings; lists and tuples come back as lists."""
    return _redact(value, _Kind.PLAIN)


def _redact(value, kind: _Kind):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            inner = max(kind, _name_kind(str(key)))
            if isinstance(item, (dict, list, tuple)) and _is_environment(str(key)):
                inner = _Kind.SECRET
            out[key] = _redact(item, inner)
        return out
    if isinstance(value, (list, tuple)):
        items = list(value)
        if kind is _Kind.PLAIN and all(isinstance(item, str) for item in items):
            items = redact_args(items)
        return [_redact(item, kind) for item in items]
    if isinstance(value, str):
        if kind is _Kind.PLAIN or value == "":
            return redact_text(value)
        return REDACTED
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)) and kind is _Kind.SECRET:
        return REDACTED
    return value


def redact_args(args: Sequence[str]) -> list[str]:
    """A command line with the value of every secret flag hidden (`--api-key X`, `--hf-token=X`)."""
    out: list[str] = []
    secret_flag: str | None = None  # the flag whose value comes next
    for arg in args:
        if secret_flag is not None and not arg.startswith("--"):
            out.append(REDACTED if _hides_text_value(secret_flag, arg) else arg)
            secret_flag = None
            continue
        secret_flag = None
        flag, eq, value = arg.partition("=")
        if flag.startswith("-") and is_secret_name(flag.lstrip("-")):
            if not eq:
                secret_flag = flag.lstrip("-")
                out.append(arg)
            else:
                out.append(f"{flag}={REDACTED}" if _hides_text_value(flag.lstrip("-"), value) else arg)
        else:
            out.append(redact_text(arg))
    return out


def _hide_value(match: re.Match) -> str:
    name, value = match.group("name"), match.group("value")
    quote = value[0] if value[0] in "\"'" and len(value) > 1 else ""
    if not _hides_text_value(name.lstrip("-"), value.strip(quote) if quote else value):
        return match.group(0)
    return f"{name}{match.group('sep')}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """Free text (a URL, a command line, a log line, a repr) with embedded secrets hidden."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')}{m.group('gap')}{REDACTED}", text)
    text = _FLAG_VALUE.sub(_hide_value, text)
    return _ASSIGNMENT.sub(_hide_value, text)


def redact_url(url: str | None) -> str | None:
    """The URL without user:password and with the values of secret query parameters hidden."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [(k, REDACTED if is_secret_name(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

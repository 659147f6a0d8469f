"""Secrets out of what a server says about itself, before costbench stores any of it.

SGLang's /server_info echoes its ServerArgs, and releases have sent `api_key` and `admin_api_key`
among them; a router, a proxy or another build may add tokens, passwords or its environment. Of
/server_info only the fields costbench reads are kept at all (common/server_info_fields.py); every
server fact costbench keeps (run.json, server_facts.json, the `runs` table) then goes through
`redact_secrets`, whatever the server sent. It lives in `common` because the first server answer
enters the project in `replay` (replay/clients/server_info_fetch.py) and in `endpoints`
(endpoints/probes/server_facts.py), siblings that may not import each other. Pure functions, no I/O.

The rule, by key name, applied recursively:
- A name is cut into words at `_`, `-`, `.`, spaces and lower-to-upper case changes (digits dropped);
  what matters is the **last** word, since a name ends in what it holds: `hf_token`, `admin_api_key`,
  `ssl_keyfile_password` and `apiKey` are secret; `speculative_token_map`, `tokenizer_path`,
  `ssl_keyfile` and `api_key_env` (a variable's name) are not. A last word that says how the thing
  is held (value, val, str, string, text, raw, data, hex, bytes, content) is skipped: `api_key_value`
  and `hf_token_str` are secret.
- Last word key(s), apikey(s), secret(s), password(s), passwd, pwd, credential(s), authorization,
  auth, bearer, cookie(s), pem, or a name ending in b64 / base64 (`client_cert_b64`, `keyB64`): every
  string and number under the name is replaced by "<redacted>", however deeply nested.
- Last word token: only strings are replaced (on a command line or in text: values that are not
  numbers). A token *count* is a number and is kept; `tokens` (plural: `max_total_num_tokens`,
  `max_prefill_tokens`) always counts and is not a secret name.
- An environment-like mapping or list (last word env, envs, environ, environment, or a name ending in
  env_vars / environment_variables): every string and number in it is replaced, since an environment
  holds secrets under any name. A plain string under such a name (`api_key_env: SGLANG_API_KEY`) is not
  an environment and is kept. Anywhere else, an object whose `name` (or `key`) is a secret name has its
  `value` replaced: `{"name": "HF_TOKEN", "value": ...}`.
- Booleans, null and empty strings are kept everywhere: whether a key is set is a fact, not a secret.
- Every other string is scrubbed: `user:password@` in a URL, `Bearer <token>`, and `NAME=value`,
  `NAME: value` or `--name value` where NAME is secret by the rule above (query strings, command
  lines, a ServerArgs repr). A list of strings is read as a command line: after a secret `--flag` the
  next item is replaced, and `--flag=value` keeps only the flag.
- And by shape, under any name or none: a PEM block; a token with a known prefix (sk-, hf_, ghp_ and
  the other gh?_, github_pat_, glpat-, xox?-) and 16 or more characters after it, one a digit or a
  capital; an AWS key id (AKIA/ASIA + 16); a JWT (eyJ….eyJ….…); a run of base64 that looks random (a
  piece of 16 or more characters between `/`, `_`, `-`, or up to 3 pieces joined reaching 24, in both
  cases, whose character class changes at 45% or more of its steps: random base64 ~64%, names and
  paths such as `DeepSeek-V3` or `Qwen2VLForConditionalGeneration` far less); a piece of 32 or more
  hex digits with letters and digits, except in a path (a model snapshot's commit) or under a
  digest's name (last word hash, digest, fingerprint, sha, checksum, commit, revision).
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
    "authorization auth bearer cookie cookies pem".split()
)
# A name may end in how it holds the thing rather than what it is: `api_key_value`, `hf_token_str`.
_HOLDER_WORDS = frozenset("value val str string text raw data hex bytes content".split())
# Encoded material (`client_cert_b64`, `sessionKeyB64`); _WORD drops digits, so the raw name is matched.
_ENCODED_NAME = re.compile(r"(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))(?:b64|B64|base64|Base64|BASE64)$")
# Digests are facts (a git commit, a sha256): a long hex run under such a name is kept.
_DIGEST_WORDS = frozenset("hash hashes digest digests fingerprint sha checksum commit revision".split())
# `{"name": "HF_TOKEN", "value": ...}`, as Kubernetes and many configs spell a variable.
_PAIR_NAMES = frozenset({"name", "key"})
_PAIR_VALUES = frozenset({"value"})
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

# Secrets by shape, whatever name (if any) they are under.
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL)  # or cut short
_PREFIXED = re.compile(  # OpenAI/Anthropic, Hugging Face, GitHub, GitLab, Slack
    r"(?<![A-Za-z0-9])(?:sk-|hf_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-)(?P<tail>[A-Za-z0-9_-]{16,})"
)
_AWS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
# A run of base64 (standard or URL-safe) characters, judged piece by piece between `/`, `_` and `-`.
_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_RUN_SEPARATOR = re.compile(r"[/_-]")
_B64_PIECE = re.compile(r"[A-Za-z0-9+]+")
_LONG_HEX = re.compile(r"(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])(?:[0-9a-f]{32,}|[0-9A-F]{32,})")


class _Kind(IntEnum):
    """How much under a name is hidden; nested names can only raise it."""

    PLAIN = 0
    TOKEN = 1  # strings
    SECRET = 2  # strings and numbers


def _words(name: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(name)]


@lru_cache(maxsize=4096)  # pure; a scrape asks for the same few label names every second
def _name_kind(name: str) -> _Kind:
    if _ENCODED_NAME.search(name):
        return _Kind.SECRET
    words = _words(name)
    while len(words) > 1 and words[-1] in _HOLDER_WORDS:
        words.pop()
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


def _is_digest_name(name: str) -> bool:
    words = _words(name)
    return bool(words) and words[-1] in _DIGEST_WORDS


def _pair_is_secret(obj: dict) -> bool:
    return any(str(k).lower() in _PAIR_NAMES and isinstance(v, str) and is_secret_name(v) for k, v in obj.items())


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
    return _redact(value, _Kind.PLAIN, False)


def _redact(value, kind: _Kind, digest: bool):
    if isinstance(value, dict):
        out = {}
        pair = _pair_is_secret(value)
        for key, item in value.items():
            inner = max(kind, _name_kind(str(key)))
            if (isinstance(item, (dict, list, tuple)) and _is_environment(str(key))) or (
                pair and str(key).lower() in _PAIR_VALUES
            ):
                inner = _Kind.SECRET
            out[key] = _redact(item, inner, digest or _is_digest_name(str(key)))
        return out
    if isinstance(value, (list, tuple)):
        items = list(value)
        if kind is _Kind.PLAIN and all(isinstance(item, str) for item in items):
            items = redact_args(items, digest)
        return [_redact(item, kind, digest) for item in items]
    if isinstance(value, str):
        if kind is _Kind.PLAIN or value == "":
            return redact_text(value, digest)
        return REDACTED
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)) and kind is _Kind.SECRET:
        return REDACTED
    return value


def redact_args(args: Sequence[str], keep_digests: bool = False) -> list[str]:
    """A command line with the value of every secret flag hidden (`--api-key X`, `--hf-token=X`), and every
    argument shaped like a secret (redact_text)."""
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
            out.append(redact_text(arg, keep_digests))
    return out


def _hide_value(match: re.Match) -> str:
    name, value = match.group("name"), match.group("value")
    quote = value[0] if value[0] in "\"'" and len(value) > 1 else ""
    if not _hides_text_value(name.lstrip("-"), value.strip(quote) if quote else value):
        return match.group(0)
    return f"{name}{match.group('sep')}{quote}{REDACTED}{quote}"


def _hide_run(match: re.Match, keep_digests: bool) -> str:
    run = match.group(0)
    pieces = _RUN_SEPARATOR.split(run.rstrip("="))
    if any(_looks_random(piece, 16) for piece in pieces) or (len(pieces) <= 3 and _looks_random("".join(pieces), 24)):
        return REDACTED
    if keep_digests or "/" in run:  # a digest under a digest's name, or a path segment (a model snapshot)
        return run
    return REDACTED if any(_LONG_HEX.fullmatch(piece) for piece in pieces) else run


def _looks_random(piece: str, min_chars: int) -> bool:
    """Base64-like: both cases, and the character class (upper, lower, digit, +) changes at 45% or more of
    its steps; random base64 changes at ~64%, names and paths (`DeepSeek-V3`, `ForCausalLM`) far less."""
    if len(piece) < min_chars or not _B64_PIECE.fullmatch(piece) or piece.islower() or piece.isupper():
        return False
    classes = [_char_class(c) for c in piece]
    return sum(a != b for a, b in zip(classes, classes[1:])) >= 0.45 * (len(piece) - 1)


def _char_class(char: str) -> int:
    return 0 if char.isupper() else 1 if char.islower() else 2 if char.isdigit() else 3


def _hide_prefixed(match: re.Match) -> str:
    tail = match.group("tail")  # a word such as `sk-learn-estimator` has no digit and no capital
    return REDACTED if any(c.isdigit() or c.isupper() for c in tail) else match.group(0)


def redact_text(text: str, keep_digests: bool = False) -> str:
    """Free text (a URL, a command line, a log line, a repr) with embedded secrets hidden: by the name they
    follow, and by their shape (a known token prefix, a PEM block, a JWT, a long random-looking run).

    keep_digests: the text is a digest's value (a hash, a commit), so a long hex run in it is kept."""
    text = _PEM.sub(REDACTED, text)
    text = _PREFIXED.sub(_hide_prefixed, text)
    text = _AWS_KEY_ID.sub(REDACTED, text)
    text = _JWT.sub(REDACTED, text)
    text = _RUN.sub(lambda m: _hide_run(m, keep_digests), text)
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

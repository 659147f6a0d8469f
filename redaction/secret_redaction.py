"""Secrets out of every text costbench stores: what a server says about itself (/server_info, whose
ServerArgs have held `api_key`), its /metrics labels, its error bodies. Lives in `common` because those
texts enter the project in `replay` and in `endpoints`, siblings that may not import each other. Pure.

The rule, by key name, applied recursively (docs/replay.md, "Secrets in what a run keeps"):
- A name is cut into words at `_`, `-`, `.`, spaces and lower-to-upper case changes (digits dropped);
  what matters is the **last** word, since a name ends in what it holds: `hf_token`, `admin_api_key`,
  `apiKey` are secret; `speculative_token_map`, `ssl_keyfile`, `api_key_env` (a variable's name) are
  not. A last word that says how the thing is held (value, str, data, hex …) is skipped: `api_key_value`.
- Last word key(s), apikey(s), secret(s), password(s), passwd, pwd, passphrase(s), credential(s),
  authorization, auth, bearer, cookie(s), pem, sig, signature(s) (`X-Amz-Signature`, an Azure SAS
  `sig`), one word ending in password, passwd, passphrase or secret (`PGPASSWORD`), or a name ending in
  b64 / base64 (`client_cert_b64`): every string and number under the name is replaced by "<redacted>".
- Last word token: only strings are replaced; a token *count* is a number and is kept; `tokens`
  (`max_total_num_tokens`) always counts and is not a secret name.
- An environment (last word env, envs, environ, environment, or ending in env_vars /
  environment_variables) that is a mapping or list: everything in it is replaced. Anywhere, an object
  whose `name` (or `key`) is a secret name has its `value` replaced: `{"name": "HF_TOKEN", "value": ...}`.
- Booleans, null and empty strings are kept everywhere: whether a key is set is a fact, not a secret.
- Every other string is scrubbed (`redact_text`): by shape first (redaction/secret_shapes.py), then
  `NAME=value`, `NAME: value` or `--name value` where NAME is secret by the rule above. A list of
  strings is read as a command line: after a secret `--flag` the next item is replaced.
- Values known to be secret (the API key this process sends) go wherever they occur: `redact_values`,
  with `secret_header_values` to name them from the request's headers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from urllib.parse import quote as percent_encoded

from redaction.secret_shapes import REDACTED as REDACTED  # re-exported: the owner is redaction/secret_shapes.py
from redaction.secret_shapes import hide_shapes

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_STRONG_WORDS = frozenset(
    "key keys apikey apikeys secret secrets password passwords passwd pwd passphrase passphrases credential "
    "credentials authorization auth bearer cookie cookies pem sig signature signatures".split()
)
# One word that ends in a secret word (`PGPASSWORD`, `clientsecret`) is as secret as the two words.
_FUSED_TAILS = ("password", "passwd", "passphrase", "secret")
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

_VALUE = r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s\"',;&?#)\]}]+)"
# `name=value`, `name: value`, `"name": "value"`; a colon needs a space or a quote after it, so
# `http://` and `host:port` are not assignments. A name starts a word and has 100 characters at most: else
# the regex rescans the rest of a word from each of its characters (minutes for 64 KiB without a space).
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,99})(?P<sep>[\"']?(?:\s*=\s*|:\s+|:(?=[\"'])))" + _VALUE
)
_FLAG_VALUE = re.compile(r"(?<![A-Za-z0-9_-])(?P<name>--[A-Za-z][A-Za-z0-9_-]{0,99})(?P<sep>\s+)" + _VALUE)


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
    if words[-1] in _STRONG_WORDS or words[-1].endswith(_FUSED_TAILS):
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


def redact_text(text: str, keep_digests: bool = False) -> str:
    """Free text (a URL, a command line, a log line, a repr) with embedded secrets hidden: by the name they
    follow, and by their shape (a known token prefix, a PEM block, a JWT, a long random-looking run).

    keep_digests: the text is a digest's value (a hash, a commit), so a long hex run in it is kept."""
    text = hide_shapes(text, keep_digests)
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


# A known value shorter than this is replaced only where it stands alone, not inside a longer word.
_SHORT_KNOWN_CHARS = 8


def secret_header_values(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The secrets in headers this process sends: each secret-named header's value (`Authorization`,
    `X-API-Key`) and, after a scheme (`Bearer sk-…`), the credential alone."""
    found: list[str] = []
    for name, value in headers.items():
        if is_secret_name(name) and value.strip():
            found.append(value.strip())
            credential = value.strip().partition(" ")[2].strip()
            if credential:
                found.append(credential)
    return tuple(found)


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each known secret replaced by REDACTED: as it is, percent-encoded and
    JSON-escaped (how a server echoes what it was sent). Longest first, so a key inside its header goes whole."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        for form in dict.fromkeys((secret, percent_encoded(secret, safe=""), json.dumps(secret)[1:-1])):
            if len(form) >= _SHORT_KNOWN_CHARS:
                text = text.replace(form, REDACTED)
            elif form in text:
                text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])", REDACTED, text)
    return text


def redact_clipped(text: str, max_chars: int, secrets: Iterable[str] = ()) -> str:
    """At most `max_chars` of `text` (then "…"), with the known `secrets` and every secret by shape or name hidden.

    Bounded work whatever the text's length: only its first 2 × max_chars are redacted, cut at whitespace
    where there is any, so that no secret (no token, URL or header value) is cut in two and half of it kept."""
    text = redact_values(text, secrets)  # str.replace: cheap at any length, and the key is never cut
    cut = len(text)
    if cut > 2 * max_chars:
        cut = max(text.rfind(space, 0, 2 * max_chars) for space in " \n\t")
        cut = cut if cut > 0 else 2 * max_chars
    shown = redact_text(text[:cut])
    return shown[:max_chars] + "…" if len(shown) > max_chars or cut < len(text) else shown

"""Secrets by the shape of their value, under any name or none: the half of the redaction rule that needs no
name (redaction/secret_redaction.py, the other half, calls `hide_shapes` first). Pure functions, no I/O.

Each shape is a pattern: its match, or its group `s` (the secret part), becomes "<redacted>" unless its judge
says the match is no secret. The shapes and their miss rate on tests/secret_corpus.py: docs/replay.md.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

REDACTED = "<redacted>"
_B, _E = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"  # not inside a longer word
_MYSQL_CLIENT = re.compile(r"\b(?:mysql|mariadb)")


def _has_digit_or_capital(m: re.Match) -> bool:  # `sk-learn-estimator` is a word, not a key
    return any(c.isdigit() or c.isupper() for c in m.group("tail"))


def _not_numbers(m: re.Match) -> bool:  # `-p2222`, `-p8080:80` (ports), `-u 1000:1000` (uid:gid)
    return not re.fullmatch(r"[\d:.]+", m.group("s"))


def _mysql_password(m: re.Match) -> bool:  # `-pthread`, `-pedantic`: a word, unless the line names a MySQL client
    lo = max(0, m.start() - 200)  # the line's last 200 characters before it: bounded work per match
    line = m.string[max(lo, m.string.rfind("\n", lo, m.start()) + 1) : m.start()]
    return _not_numbers(m) and (not re.fullmatch(r"[a-z-]+", m.group("s")) or bool(_MYSQL_CLIENT.search(line)))


def _bearer_or_basic(m: re.Match) -> bool:  # `Basic usage` is prose, `Basic dXNlcjpwYXNz` a credential
    return m.group(0)[:6].lower() == "bearer" or not re.fullmatch(r"[A-Z]?[a-z]+", m.group("s"))


def _shape(pattern: str, judge: Callable[[re.Match], bool] | None = None, flags: int = 0):
    return re.compile(pattern, flags | re.ASCII), judge


_SHAPES = (
    _shape(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", flags=re.DOTALL),  # PEM, or cut short
    # A vendor's prefix: OpenAI/Anthropic, Hugging Face, GitHub, GitLab, Slack, Stripe, npm, PyPI, DigitalOcean,
    # Shopify, HashiCorp Vault, New Relic.
    _shape(
        _B + r"(?:sk-|hf_|gh[pousr]_|github_pat_|gl(?:pat|ptt|dt)-|xox[abposr]-|[rs]k_(?:live|test)_|whsec_|npm_|"
        r"pypi-|dop_v1_|shp(?:at|ss|ca|pa)_|hv[sb]\.|NRAK-)(?P<tail>[A-Za-z0-9_-]{16,})",
        _has_digit_or_capital,
    ),
    # Fixed forms: Databricks, Twilio (AC/SK sids), Mailgun, AWS key ids, Google API keys, age, SendGrid, Azure AD
    # client secrets; then Telegram bots (alone or in their API's URL).
    _shape(
        _B + r"(?:dapi[0-9a-f]{32}(?:-\d+)?|(?:AC|SK)[0-9a-f]{32}|key-[0-9A-Za-z]{32}|(?:AKIA|ASIA)[A-Z0-9]{16}|"
        r"AIza[\w-]{35}|AGE-SECRET-KEY-1[0-9A-Z]{58}|SG\.[\w-]{16,}\.[\w-]{16,}|[\w.-]{3}\dQ~[\w~.-]{31,34})" + _E
    ),
    _shape(r"(?:(?<![A-Za-z0-9])|(?<=/bot))\d{8,10}:AA[\w-]{33}" + _E),
    _shape(r"(?<![\w-])eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*"),  # JWT
    _shape(
        r"(?:hooks\.slack\.com/(?:services|workflows|triggers)|discord(?:app)?\.com/api/webhooks)"
        r"/(?P<s>[^\s\"'<>]+)"
    ),
    _shape(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://(?P<s>[^/\s?#\"'<>]+)@"),  # user:password@ (to the last @)
    _shape(r"\bmachine\s+\S+\s+login\s+\S+\s+password\s+(?P<s>\S+)"),  # .netrc
    _shape(r"(?:^|(?<=\s))(?:-u\s*|--user[\s=]+)(?P<s>[^\s:\"']*:[^\s\"']+)", _not_numbers),  # curl -u user:password
    _shape(r"(?:^|(?<=\s))-p(?P<s>[^\s\"']{3,})", _mysql_password),  # mysql -pPASSWORD
    # An Authorization header, whatever its scheme (Bearer, Basic, Token, AWS4-HMAC-SHA256 …); a bare Bearer, Basic.
    _shape(r"\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?P<s>(?:[A-Za-z][\w-]*\s+)?[^\s\"',;]+)", flags=re.I),
    _shape(r"\b(?:Bearer|Basic)\s+(?P<s>[\w.~+/=-]+)", _bearer_or_basic, flags=re.I),
)

# A run of base64 (standard or URL-safe) characters, judged piece by piece between `/`, `_` and `-`.
_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_RUN_SEPARATOR = re.compile(r"[/_-]")
_B64_PIECE = re.compile(r"[A-Za-z0-9+]+")
_LONG_HEX = re.compile(r"(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])(?:[0-9a-f]{32,}|[0-9A-F]{32,})")
_AWS_SECRET = re.compile(r"(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9+/])[A-Za-z0-9+/]{40}")
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")


def hide_shapes(text: str, keep_digests: bool = False) -> str:
    """`text` with every value shaped like a secret replaced by REDACTED.

    keep_digests: the text is a digest's value (a hash, a commit), so a long hex run in it is kept."""
    for pattern, judge in _SHAPES:
        text = pattern.sub(lambda m, judge=judge: _hide(m, judge), text)
    return _RUN.sub(lambda m: _hide_run(m.group(0), keep_digests), text)


def _hide(m: re.Match, judge: Callable[[re.Match], bool] | None) -> str:
    if judge is not None and not judge(m):
        return m.group(0)
    if "s" not in m.re.groupindex:
        return REDACTED
    return m.string[m.start() : m.start("s")] + REDACTED + m.string[m.end("s") : m.end()]


def _hide_run(run: str, keep_digests: bool) -> str:
    pieces = _RUN_SEPARATOR.split(run.rstrip("="))
    if any(_looks_random(piece, 16) for piece in pieces) or (len(pieces) <= 3 and _looks_random("".join(pieces), 24)):
        return REDACTED
    if _looks_like_aws_secret(run):
        return REDACTED
    if keep_digests or "/" in run:  # a digest under a digest's name, or a path segment (a model snapshot)
        return run
    return REDACTED if any(_LONG_HEX.fullmatch(piece) for piece in pieces) else run


def _looks_random(piece: str, min_chars: int) -> bool:
    """Base64-like: both cases, and the character class (upper, lower, digit, +) changes at 45% or more of
    its steps; random base64 changes at ~64%, names and paths (`DeepSeek-V3`, `ForCausalLM`) far less."""
    if len(piece) < min_chars or not _B64_PIECE.fullmatch(piece) or piece.islower() or piece.isupper():
        return False
    return _class_changes(piece) >= 0.45


def _looks_like_aws_secret(run: str) -> bool:
    """40 base64 characters, `/` and `+` included (an AWS secret access key): both cases and a digit or a
    symbol, 4.2 bits or more per character, a class change at 30% of its steps, and under 55% of it in
    lower-case runs of three or more (`DeepseekV3ForCausalLMWithMTPLayerAndMore` is a name: 68%)."""
    if not _AWS_SECRET.fullmatch(run):
        return False
    entropy_bits = -sum(n / 40 * math.log2(n / 40) for n in Counter(run).values())
    wordlike = sum(len(word) for word in _WORDLIKE.findall(run)) / 40
    return entropy_bits >= 4.2 and _class_changes(run) >= 0.3 and wordlike < 0.55


def _class_changes(piece: str) -> float:
    classes = [0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3 for c in piece]
    return sum(a != b for a, b in zip(classes, classes[1:])) / (len(piece) - 1)

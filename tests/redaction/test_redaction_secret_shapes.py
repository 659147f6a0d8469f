"""Secrets by shape (redaction/secret_shapes.py), known values, and the bounded redaction of long texts, measured on
the corpus of tests/secret_corpus.py: every shape redacted, every ordinary string kept (the figures in
docs/replay.md, "Secrets in what a run keeps", come from here)."""

from __future__ import annotations

import base64
import random
import string
import time

import pytest

from redaction.secret_redaction import (
    REDACTED,
    is_secret_name,
    redact_clipped,
    redact_secrets,
    redact_text,
    redact_values,
    secret_header_values,
)
from secret_corpus import ordinary_strings, secret_cases

CASES = secret_cases()


def test_the_corpus_has_at_least_fifty_shapes_each_once():
    assert len(CASES) >= 50
    assert len({case.shape for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.shape for case in CASES])
def test_every_shape_of_the_corpus_is_redacted(case):
    for out in (redact_text(case.text), redact_secrets({"note": case.text})["note"]):
        assert REDACTED in out
        for secret in case.secrets:
            assert secret not in out, f"{case.shape}: {out}"


def test_miss_rate_on_the_corpus():
    """The figure docs/replay.md states: shapes whose secret (or part of it) survived redact_text."""
    missed = [case.shape for case in CASES if any(secret in redact_text(case.text) for secret in case.secrets)]
    assert (len(CASES), missed) == (79, [])


@pytest.mark.parametrize("text", ordinary_strings())
def test_ordinary_strings_are_kept(text):
    assert redact_text(text) == text
    assert redact_secrets({"note": text, "model_path": text}) == {"note": text, "model_path": text}


def test_digests_costbench_stores_are_kept_under_their_names():
    rng = random.Random(39)
    lake_checksum = rng.randbytes(32).hex()  # warehouse/parquet/lake_checksum.py: a file's whole sha256
    facts = {"sha256": lake_checksum, "workload_hash": "a3f2b9c1e7d40516", "config_fingerprint": "3f2a9c1e7b4d"}
    assert redact_secrets(facts) == facts


@pytest.mark.parametrize("name", ["X-Amz-Signature", "X-Goog-Signature", "Signature", "sig", "passphrase",
                                  "PGPASSWORD", "MYSQL_ROOT_PASSWORD", "clientsecret", "X-Amz-Credential"])  # fmt: skip
def test_signature_and_passphrase_names_are_secret(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["signal", "design", "signed_headers", "X-Amz-SignedHeaders", "passthrough"])
def test_names_near_them_are_not(name):
    assert not is_secret_name(name)


def test_known_values_go_wherever_a_server_echoes_them():
    key = "costbench-test/key+1"  # no shape a rule knows: only its value says it is the key
    body = f'HTTP 401: {{"detail": "bad key {key}", "url": "/v1?q={key.replace("/", "%2F").replace("+", "%2B")}"}}'
    out = redact_values(body, secret_header_values({"Authorization": f"Bearer {key}", "Accept": "text/plain"}))
    assert key not in out and "%2Fkey%2B1" not in out and out.count(REDACTED) == 2
    assert redact_values("Bearer abc", ["Bearer abc", "abc"]) == REDACTED  # the header's value goes whole


def test_a_short_known_value_goes_only_where_it_stands_alone():
    assert redact_values("key k1 in bk1x", ["k1"]) == f"key {REDACTED} in bk1x"


def test_secret_header_values_name_only_secret_headers():
    headers = {"Authorization": "Bearer sk-1", "X-API-Key": "k2", "Content-Type": "application/json"}
    assert secret_header_values(headers) == ("Bearer sk-1", "sk-1", "k2")


def test_a_long_text_is_cut_at_whitespace_before_redaction_so_no_secret_is_cut_in_two():
    key = "ghp_" + "aB3" * 12
    text = "x" * 1990 + " " + key + " tail " + "y" * 10_000
    out = redact_clipped(text, 2000)
    assert key[:8] not in out and out.endswith("…") and len(out) <= 2001
    assert redact_clipped("short " + key, 2000) == f"short {REDACTED}"


_LONG = 64 * 1024


@pytest.mark.parametrize(
    "text",
    ["a" * _LONG, "a." * (_LONG // 2), "x://" + "a" * _LONG, " -pxxxxx" * (_LONG // 8), ("A" * 15 + "-") * (_LONG // 16),
     "dapi" * (_LONG // 4), "a-" * (_LONG // 2), "machine a login b " * (_LONG // 18)],
    ids=["letters", "dots", "url", "dash-p", "runs", "prefixes", "dashes", "netrc"],
)  # fmt: skip
def test_redaction_takes_linear_time_on_a_hostile_64_kib(text):
    """A name is tried from word starts only and has 100 characters at most: tried from every character, a
    64 KiB word took minutes (an error body or a label value a hostile endpoint chooses)."""
    started = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - started < 5.0


def _random_values(kind: str, n: int) -> list[str]:
    rng = random.Random(39)
    alnum = string.ascii_letters + string.digits
    make = {
        "base64_32_bytes": lambda: base64.b64encode(rng.randbytes(32)).decode(),
        "base64url_32_bytes": lambda: base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("="),
        "alnum_40": lambda: "".join(rng.choice(alnum) for _ in range(40)),
        "aws_secret_40": lambda: base64.b64encode(rng.randbytes(30)).decode(),
        "hex_32_bytes": lambda: rng.randbytes(32).hex(),
        "openai_48": lambda: "sk-" + "".join(rng.choice(alnum) for _ in range(48)),
    }[kind]
    return [make() for _ in range(n)]


@pytest.mark.parametrize(
    "kind, missed",
    [("base64_32_bytes", 271), ("base64url_32_bytes", 919), ("alnum_40", 39), ("aws_secret_40", 20),
     ("hex_32_bytes", 0), ("openai_48", 0)],
)  # fmt: skip
def test_bare_random_keys_missed_out_of_20000(kind, missed):
    """Bare keys with no name and no prefix, judged by their look alone: the misses docs/replay.md states."""
    values = _random_values(kind, 20_000)
    assert sum(value in redact_text(f"value {value} end") for value in values) == missed

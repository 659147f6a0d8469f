"""The redaction rule (common/secret_redaction.py): secret by the last word of a name, counts kept."""

from __future__ import annotations

import pytest

from common.secret_redaction import REDACTED, is_secret_name, redact_args, redact_secrets, redact_text, redact_url


@pytest.mark.parametrize(
    "name",
    ["api_key", "admin_api_key", "apiKey", "APIKey", "hf_token", "HF_TOKEN", "OPENAI_API_KEY", "ssl_keyfile_password",
     "client-secret", "aws.secret_access_key", "password", "passwd", "credentials", "Authorization", "cookie", "key",
     "api_key2"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_total_num_tokens", "max_prefill_tokens", "speculative_num_draft_tokens", "tokenizer_path", "tokenizer_mode",
     "skip_tokenizer_init", "speculative_token_map", "ssl_keyfile", "api_key_env", "enable_cache_report",
     "kv_cache_dtype", "disaggregation_bootstrap_port", "monkey", "tokens", "keyboard", ""],
)  # fmt: skip
def test_names_that_only_contain_a_secret_word_are_kept(name):
    assert not is_secret_name(name)


def test_a_server_info_keeps_its_facts_and_loses_its_secrets():
    info = {
        "api_key": "sk-1",
        "admin_api_key": None,  # unset: null stays null
        "apiKey": 12345,  # a number under a key name is hidden too
        "hf_token": "hf_1",
        "bos_token": "<s>",  # strings under `token` are hidden, whatever they are
        "max_token": 5,  # a number under `token` is a count
        "max_total_num_tokens": 400000,
        "stop_token_ids": [1, 2],
        "enable_cache_report": True,
        "api_key_set": True,
        "api_key_env": "SGLANG_API_KEY",
        "ssl_keyfile": "/etc/key.pem",
        "credentials": {"user": "u", "n": 3, "ok": True},
        "scheduler_info": {"max_total_num_tokens": 7, "nested": [{"secret": "s"}]},
        "empty_password": "",
    }
    assert redact_secrets(info) == {
        "api_key": REDACTED,
        "admin_api_key": None,
        "apiKey": REDACTED,
        "hf_token": REDACTED,
        "bos_token": REDACTED,
        "max_token": 5,
        "max_total_num_tokens": 400000,
        "stop_token_ids": [1, 2],
        "enable_cache_report": True,
        "api_key_set": True,
        "api_key_env": "SGLANG_API_KEY",
        "ssl_keyfile": "/etc/key.pem",
        "credentials": {"user": REDACTED, "n": REDACTED, "ok": True},
        "scheduler_info": {"max_total_num_tokens": 7, "nested": [{"secret": REDACTED}]},
        "empty_password": "",
    }


def test_an_environment_is_hidden_whole_but_a_variable_name_is_not():
    out = redact_secrets({"env": {"HF_HOME": "/h", "DATABASE_URL": "postgres://db"}, "environment_variables": ["A=1"],
                          "worker_env": "plain"})  # fmt: skip
    assert out == {"env": {"HF_HOME": REDACTED, "DATABASE_URL": REDACTED}, "environment_variables": [REDACTED],
                   "worker_env": "plain"}  # fmt: skip


def test_the_input_is_not_changed():
    info = {"api_key": "sk-1", "list": ["--api-key", "sk-2"]}
    redact_secrets(info)
    assert info == {"api_key": "sk-1", "list": ["--api-key", "sk-2"]}


def test_command_lines_hide_the_value_of_secret_flags_only():
    args = ["--tp", "8", "--api-key", "sk-1", "--hf-token=hf_1", "--max-prefill-tokens", "16384", "--admin-api-key",
            "--port", "1", "--some-token", "7"]  # fmt: skip
    assert redact_args(args) == ["--tp", "8", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--max-prefill-tokens",
                                 "16384", "--admin-api-key", "--port", "1", "--some-token", "7"]  # fmt: skip
    assert redact_secrets({"argv": args})["argv"] == redact_args(args)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("http://alice:pw@h:1/x?api_key=sk-5&x=1", f"http://{REDACTED}@h:1/x?api_key={REDACTED}&x=1"),
        ("python -m sglang.launch_server --api-key sk-4 --port 1", f"python -m sglang.launch_server --api-key {REDACTED} --port 1"),
        ("ServerArgs(model_path='m', api_key='sk-6', max_total_tokens=None)",
         f"ServerArgs(model_path='m', api_key='{REDACTED}', max_total_tokens=None)"),
        ('{"api_key":"sk-8", "tp_size": 8}', f'{{"api_key":"{REDACTED}", "tp_size": 8}}'),
        ("Authorization: Bearer sk-7", f"Authorization: {REDACTED} {REDACTED}"),
        ("curl -H 'x: Bearer abc.def'", f"curl -H 'x: Bearer {REDACTED}'"),
        ("max_total_num_tokens=5 hf_token=7 token: abc", f"max_total_num_tokens=5 hf_token=7 token: {REDACTED}"),
        ("api_key=None and api_key=''", "api_key=None and api_key=''"),
        ("http://127.0.0.1:30000/metrics host:8000", "http://127.0.0.1:30000/metrics host:8000"),
    ],
)  # fmt: skip
def test_secrets_inside_text(text, expected):
    assert redact_text(text) == expected
    assert redact_secrets({"note": text}) == {"note": expected}


def test_urls_lose_their_user_info_and_secret_query_values():
    assert redact_url("http://u:p@h:1/v1?api_key=sk&x=1") == "http://h:1/v1?api_key=%3Credacted%3E&x=1"
    assert redact_url(None) is None

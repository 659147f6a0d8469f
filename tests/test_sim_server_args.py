"""The twin's flags: SGLang's names and aliases, strict about the rest."""

import pytest

from endpoints.sim.schedule_policy import SchedulePolicy
from endpoints.sim.server_args import ServerArgsError, parse_server_args


def test_sglang_aliases_map_to_the_same_fields():
    long = parse_server_args(["--model-path", "m/DeepSeek-V3", "--tp-size", "8", "--dp-size", "2"])
    short = parse_server_args(["--model", "m/DeepSeek-V3", "--tp", "8", "--dp", "2"])
    assert (long.model_path, long.tp_size, long.dp_size) == (short.model_path, short.tp_size, short.dp_size) == (
        "m/DeepSeek-V3", 8, 2,
    )  # fmt: skip


def test_defaults_follow_sglang():
    args = parse_server_args([])
    assert args.port == 30000 and args.host == "127.0.0.1"
    assert args.schedule_policy is SchedulePolicy.FCFS and args.stream_interval == 1
    assert args.served_model_name == args.model_path == args.tokenizer_path
    assert args.kv_dtype_bytes == 2 and parse_server_args(["--kv-cache-dtype", "fp8_e4m3"]).kv_dtype_bytes == 1
    assert parse_server_args(["--skip-server-warmup", "--sim-warmup-s", "9"]).warmup_s == 0


def test_accepted_sglang_flags_are_recorded_and_unknown_ones_rejected():
    info = parse_server_args(["--trust-remote-code", "--log-level", "warning"]).as_server_info()
    assert info["trust_remote_code"] is True and info["log_level"] == "warning"
    with pytest.raises(ServerArgsError, match="--tp-sise"):
        parse_server_args(["--tp-sise", "8"])
    with pytest.raises(ServerArgsError, match="does not model"):
        parse_server_args(["--enable-hierarchical-cache"])
    with pytest.raises(ServerArgsError, match="--schedule-policy"):
        parse_server_args(["--schedule-policy", "dfs-weight"])
    with pytest.raises(ServerArgsError, match="--mem-fraction-static"):
        parse_server_args(["--mem-fraction-static", "1.5"])
    with pytest.raises(ServerArgsError, match="--chunked-prefill-size"):
        parse_server_args(["--chunked-prefill-size", "0"])

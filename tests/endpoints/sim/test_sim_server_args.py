"""The twin's flags: SGLang's names and aliases, strict about the rest."""

import pytest

from endpoints.sim.engine.schedule_policy import SchedulePolicy
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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--disable-overlap-schedule"],
            "--disable-overlap-schedule is a real SGLang flag that changes cost, refused: the twin models the overlap scheduler",
        ),
        (
            ["--disable-cuda-graph"],
            "--disable-cuda-graph is a real SGLang flag that changes cost, refused: the twin's decode step is a CUDA-graph replay",
        ),
        (["--enable-torch-compile"], "--enable-torch-compile is a real SGLang flag that changes cost, refused"),
        (["--moe-a2a-backend", "mooncake"], "--moe-a2a-backend mooncake: the twin models none and deepep only"),
        (["--enable-eplb"], "--enable-eplb needs expert parallelism (--ep-size above 1, or --moe-a2a-backend deepep)"),
        (["--tp", "8", "--ep", "3"], "--ep-size 3 must divide --tp-size 8"),
        (["--tp", "8", "--ep", "4", "--moe-a2a-backend", "deepep"], "--ep-size 4: with --moe-a2a-backend deepep"),
        (["--tp", "8", "--ep", "8", "--enable-two-batch-overlap"], "--enable-two-batch-overlap overlaps DeepEP's"),
        (["--tp", "8", "--ep", "8", "--ep-num-redundant-experts", "4"], "--ep-num-redundant-experts 4: 256 routed"),
        (["--tp", "16"], "--tp-size 16 over --nnodes 1 puts 16 GPUs on a host; a h200 host has 8"),
        (["--tp", "16", "--nnodes", "2"], "--nnodes 2 needs --dist-init-addr"),
        (["--tp", "16", "--nnodes", "2", "--node-rank", "2"], "--node-rank 2 must be in 0..1"),
        (
            ["--page-size", "64"],
            "--page-size 64: a paged KV cache is not modelled (the radix cache matches token by token); the twin accepts only --page-size 1 or leaves it unset",
        ),
        (["--dtype", "float32"], "--dtype float32: only the checkpoint's own bf16 activations are modelled"),
        (
            ["--quantization", "w8a8_int8"],
            "--quantization w8a8_int8: only the checkpoint's own block-FP8 weights are modelled",
        ),
    ],
)
def test_flags_that_change_cost_but_are_not_modelled_are_refused_by_name_saying_why(argv, message):
    with pytest.raises(ServerArgsError) as refused:
        parse_server_args(argv)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_pass_through_flags_take_sglangs_types_and_defaults_and_the_modelled_values_are_accepted():
    info = parse_server_args([]).as_server_info()
    assert (info["log_level"], info["nnodes"], info["node_rank"], info["decode_log_interval"]) == ("info", 1, 0, 40)
    assert (info["ep_size"], info["moe_a2a_backend"], info["dtype"], info["watchdog_timeout"]) == (
        1,
        "none",
        "auto",
        300,
    )
    published = parse_server_args(
        ["--tp", "8", "--ep", "1", "--page-size", "1", "--dtype", "bfloat16", "--quantization", "fp8",
         "--attention-backend", "flashinfer", "--cuda-graph-max-bs", "512", "--nnodes", "2",
         "--dist-init-addr", "10.0.0.1:5000"]
    ).as_server_info()  # fmt: skip
    assert (published["ep_size"], published["page_size"], published["nnodes"]) == (1, 1, 2)
    # SGLang's deprecated alias (up to 0.5.19) of --cuda-graph-max-bs-decode lands on the same field.
    assert published["cuda_graph_max_bs_decode"] == 512
    with pytest.raises(ServerArgsError, match="--nnodes"):
        parse_server_args(["--nnodes", "two"])


def test_expert_parallel_flags_resolve_as_sglang_resolves_them():
    wide = parse_server_args(
        ["--tp", "32", "--dp", "32", "--enable-dp-attention", "--moe-a2a-backend", "deepep", "--enable-eplb",
         "--ep-num-redundant-experts", "32", "--enable-two-batch-overlap", "--deepep-mode", "low_latency",
         "--nnodes", "4", "--node-rank", "3", "--dist-init-addr", "10.0.0.1:5000", "--sim-hardware", "h100"]
    )  # fmt: skip
    ep = wide.expert_parallel
    assert ep is not None and (ep.ep_size, ep.enable_eplb, ep.redundant_experts, ep.two_batch_overlap) == (
        32,
        True,
        32,
        True,
    )
    info = wide.as_server_info()  # DeepEP runs the experts over every TP rank: SGLang sets ep_size to tp_size
    assert (info["ep_size"], info["moe_a2a_backend"], info["deepep_mode"], info["nnodes"]) == (
        32,
        "deepep",
        "low_latency",
        4,
    )
    # An NVL72 rack's compute tray holds 4 GPUs: 48 GPUs over 12 hosts.
    rack = parse_server_args(["--tp", "48", "--ep", "48", "--ep-num-redundant-experts", "32", "--nnodes", "12",
                              "--dist-init-addr", "a:1", "--sim-hardware", "gb200"])  # fmt: skip
    assert rack.expert_parallel is not None and rack.expert_parallel.a2a_backend.value == "none"
    with pytest.raises(ServerArgsError, match="a gb200 host has 4"):
        parse_server_args(["--tp", "8", "--sim-hardware", "gb200"])


def test_token_counts_take_sglangs_suffixes_and_the_reasoning_parser_only_sglangs_names():
    args = parse_server_args(["--max-prefill-tokens", "16k", "--context-length", "32Ki"])
    assert (args.max_prefill_tokens, args.context_length) == (16000, 32768)
    assert parse_server_args(["--max-prefill-tokens", "8192"]).max_prefill_tokens == 8192
    with pytest.raises(ServerArgsError, match="--max-prefill-tokens"):
        parse_server_args(["--max-prefill-tokens", "16kb"])
    # A misspelt parser name would silently turn reasoning off; SGLang refuses it, and so does the twin.
    with pytest.raises(ServerArgsError, match="--reasoning-parser"):
        parse_server_args(["--reasoning-parser", "deepseek_r1"])

"""SGLang's own metric definitions: its collectors instantiated into a fresh prometheus_client registry.

The collectors' dependency-injection hooks (`_counter_cls`, ...) take metric classes bound to that registry,
so nothing reaches prometheus_client's global one. They read SGLang's runtime config, built here the way
`sglang serve` builds it (prepare_server_args) for a local DeepSeek-V3 config.json (no download), and
activated only while they are built (runtime_context.use_context).
"""

from __future__ import annotations

import functools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.metrics import MetricWrapperBase
from sglang.srt import runtime_context
from sglang.srt.observability import metrics_collector
from sglang.srt.server_args import prepare_server_args

# The model's config.json fields that SGLang's argument resolution reads (docs/twin.md, "Profiles").
DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "n_group": 8, "topk_group": 4, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
    "routed_scaling_factor": 2.5, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "rope_theta": 10000, "rms_norm_eps": 1e-6,
    "bos_token_id": 0, "eos_token_id": 1,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class MetricDefinition:
    name: str  # the family name, e.g. sglang:prompt_tokens for the counter sglang:prompt_tokens_total
    kind: str  # counter | gauge | histogram | summary | gaugehistogram
    label_names: frozenset[str]
    buckets: tuple[float, ...] | None  # a histogram's upper bounds, +Inf left out


def _bound_to(cls: type, registry: CollectorRegistry) -> type:
    hooks = {
        "_counter_cls": functools.partial(Counter, registry=registry),
        "_gauge_cls": functools.partial(Gauge, registry=registry),
        "_histogram_cls": functools.partial(Histogram, registry=registry),
        "_summary_cls": functools.partial(Summary, registry=registry),
    }
    return type(cls.__name__, (cls,), hooks)


def _definitions(collector: object) -> list[MetricDefinition]:
    out = []
    for metric in vars(collector).values():
        if isinstance(metric, MetricWrapperBase):
            (family,) = metric.describe()
            bounds = getattr(metric, "_upper_bounds", None)  # prometheus_client keeps no public accessor
            buckets = tuple(b for b in bounds if b != float("inf")) if bounds else None
            out.append(MetricDefinition(family.name, family.type, frozenset(metric._labelnames), buckets))
    return out


def sglang_metric_definitions(served_model_name: str) -> dict[str, MetricDefinition]:
    """Every metric the tokenizer manager's and the scheduler's collectors define, as `sglang serve
    --enable-metrics` sets them up on rank 0 of a unified (not disaggregated) server."""
    with tempfile.TemporaryDirectory() as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(DEEPSEEK_V3_CONFIG))
        server_args = prepare_server_args(
            ["--model-path", model_dir, "--served-model-name", served_model_name, "--enable-metrics",
             "--skip-tokenizer-init", "--device", "cpu"]
        )  # fmt: skip
        registry = CollectorRegistry(auto_describe=True)
        with runtime_context.use_context(runtime_context.create_context(server_args, role="tokenizer")):
            tokenizer = _bound_to(metrics_collector.TokenizerMetricsCollector, registry)(
                server_args=server_args, labels=metrics_collector.tokenizer_metric_labels()
            )
        with runtime_context.use_context(runtime_context.create_context(server_args, role="scheduler")):
            # The labels SchedulerMetricsCollector.init_new gives rank 0 of a unified server.
            labels = {"model_name": served_model_name, "engine_type": "unified", "tp_rank": 0, "pp_rank": 0,
                      "moe_ep_rank": 0}  # fmt: skip
            scheduler = _bound_to(metrics_collector.SchedulerMetricsCollector, registry)(
                labels=labels, server_args=server_args
            )
    return {d.name: d for d in (*_definitions(tokenizer), *_definitions(scheduler))}

"""A RouterSpec read into the routing model's parameters: smg's flag names and defaults (smg 1.13.0's
`smg launch --help`), every policy the model does not implement refused by name, and every flag that
changes routing in a way the model does not implement refused by name too. Flags that do not change which
worker gets a request (logging, timeouts, retries, TLS, the metrics port, ...) are accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources

from endpoints.router.expected_wait import ExpectedWaitParams
from endpoints.router.router_spec import RouterSpec
from endpoints.router.worker_loads import OverloadGuard


class PolicyName(StrEnum):
    CACHE_AWARE = "cache_aware"
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"
    POWER_OF_TWO = "power_of_two"
    PREFIX_HASH = "prefix_hash"


MODELLED_POLICIES = tuple(p.value for p in PolicyName)


class UnmodelledRouting(ValueError):
    """The router spec asks for routing the virtual clock's model does not implement."""


@dataclass(frozen=True, slots=True)
class CacheAwareParams:
    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    eviction_interval_s: float = 60.0
    max_tree_size_chars: int = 2**26


@dataclass(frozen=True, slots=True)
class PrefixHashParams:
    prefix_token_count: int = 256  # hashed over 4 × this many characters of untokenized text
    load_factor: float = 1.25
    balance_abs_threshold: int = 10


@dataclass(frozen=True, slots=True)
class RouterModelParams:
    policy: PolicyName
    cache_aware: CacheAwareParams = field(default_factory=CacheAwareParams)
    prefix_hash: PrefixHashParams = field(default_factory=PrefixHashParams)
    expected_wait: ExpectedWaitParams = field(default_factory=ExpectedWaitParams)
    overload: OverloadGuard = field(default_factory=OverloadGuard)
    load_monitor_interval_s: float = 10.0
    seed: int = 0  # the model's own random draws (ties, random, power_of_two); smg's are unseeded


# flag (every spelling) -> (parameter group, field, type)
_VALUE_FLAGS: dict[str, tuple[str, str, type]] = {
    "--cache-threshold": ("cache_aware", "cache_threshold", float),
    "--cache-match-threshold": ("cache_aware", "cache_threshold", float),
    "--balance-abs-threshold": ("cache_aware", "balance_abs_threshold", int),
    "--spill-abs-threshold": ("cache_aware", "balance_abs_threshold", int),
    "--balance-rel-threshold": ("cache_aware", "balance_rel_threshold", float),
    "--spill-rel-threshold": ("cache_aware", "balance_rel_threshold", float),
    "--eviction-interval-secs": ("cache_aware", "eviction_interval_s", float),
    "--max-tree-size": ("cache_aware", "max_tree_size_chars", int),
    "--prefix-token-count": ("prefix_hash", "prefix_token_count", int),
    "--prefix-hash-load-factor": ("prefix_hash", "load_factor", float),
    "--prefix-hash-balance-abs-threshold": ("prefix_hash", "balance_abs_threshold", int),
    "--least-load-kv-pressure-weight": ("expected_wait", "kv_pressure_weight_s", float),
    "--least-load-default-throughput": ("expected_wait", "default_throughput_tok_s", float),
    "--least-load-mean-prefill-tokens": ("expected_wait", "mean_prefill_tokens", int),
    "--worker-overload-waiting-requests": ("overload", "waiting_reqs", int),
    "--worker-overload-token-usage": ("overload", "token_usage", float),
    "--load-monitor-interval": ("", "load_monitor_interval_s", float),
}
# Flags whose value the model implements only at smg's default: any other value is refused.
_DEFAULT_ONLY: dict[str, str] = {
    "--power-of-two-load-metric": "expected_wait",
    "--cache-index": "tree",
    "--selection-temperature": "0.0",
    "--overlap-decay": "0.0",
    "--balance-token-usage-threshold": "1.0",
    "--overload-token-usage-threshold": "1.0",
    "--least-load-max-waiting-requests": "0",
    "--selection-accounting-ttl-ms": "0",
}
_SWITCHES_MODELLED = {"--worker-overload-protection": True, "--disable-worker-overload-protection": False}
_REFUSED = (
    "--cache-boundaries", "--routing-key-override", "--sticky-sessions", "--routing-key-headers", "--dp-aware",
    "--dp-minimum-tokens-scheduler", "--pd-disaggregation", "--epd-disaggregation", "--prefill-policy",
    "--decode-policy", "--worker-overload-shed", "--assignment-mode", "--enable-igw", "--kv-index",
)  # fmt: skip


def _smg_launch_flags() -> frozenset[str]:
    text = resources.files("endpoints").joinpath("router/smg_launch_flags.txt").read_text()
    return frozenset(line for line in text.splitlines() if line.startswith("--"))


SMG_LAUNCH_FLAGS = _smg_launch_flags()  # every flag smg 1.13.0's `smg launch` takes: anything else is a typo


def _split(args: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(flag, value or None) pairs from `--flag value`, `--flag=value` and bare switches."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if "=" in flag:
            name, value = flag.split("=", 1)
            pairs.append((name, value))
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            pairs.append((flag, args[i + 1]))
            i += 1
        else:
            pairs.append((flag, None))
        i += 1
    return pairs


def parse_router_spec(spec: RouterSpec, seed: int = 0) -> RouterModelParams:
    """The model's parameters for `spec`; UnmodelledRouting names what it cannot model."""
    if spec.policy not in MODELLED_POLICIES:
        raise UnmodelledRouting(
            f"router policy {spec.policy!r} is not modelled on the virtual clock; "
            f"modelled: {', '.join(MODELLED_POLICIES)} (run it against real smg in real time instead)"
        )
    groups: dict[str, dict[str, object]] = {"cache_aware": {}, "prefix_hash": {}, "expected_wait": {}, "overload": {}}
    top: dict[str, object] = {}
    for flag, value in _split(spec.args):
        if flag not in SMG_LAUNCH_FLAGS:
            raise UnmodelledRouting(f"router flag {flag} is not a flag of smg 1.13.0 (`smg launch --help` has none by "
                                    "that name)")  # fmt: skip
        if flag in ("--policy", "--worker-urls", "--host", "--port"):
            raise UnmodelledRouting(f"router args: {flag} is set by costbench, not in the router's args")
        if flag in _REFUSED:
            raise UnmodelledRouting(f"router flag {flag} changes routing in a way the virtual clock does not model")
        if flag in _DEFAULT_ONLY:
            if value is None or _same(value, _DEFAULT_ONLY[flag]) is False:
                raise UnmodelledRouting(
                    f"router flag {flag} {value}: only smg's default ({_DEFAULT_ONLY[flag]}) is modelled"
                )
            continue
        if flag in _SWITCHES_MODELLED:
            groups["overload"]["enabled"] = _SWITCHES_MODELLED[flag]
            continue
        if flag in _VALUE_FLAGS:
            group, name, kind = _VALUE_FLAGS[flag]
            if value is None:
                raise UnmodelledRouting(f"router flag {flag} needs a value")
            try:
                parsed = kind(value)
            except ValueError:
                raise UnmodelledRouting(f"router flag {flag}: {value!r} is not a {kind.__name__}") from None
            (groups[group] if group else top)[name] = parsed
    params = RouterModelParams(
        policy=PolicyName(spec.policy),
        cache_aware=CacheAwareParams(**groups["cache_aware"]),  # type: ignore[arg-type]
        prefix_hash=PrefixHashParams(**groups["prefix_hash"]),  # type: ignore[arg-type]
        expected_wait=ExpectedWaitParams(**groups["expected_wait"]),  # type: ignore[arg-type]
        overload=OverloadGuard(**groups["overload"]),  # type: ignore[arg-type]
        seed=seed,
        **top,  # type: ignore[arg-type]
    )
    _check(params)
    return params


def _same(value: str, default: str) -> bool:
    try:
        return float(value) == float(default)
    except ValueError:
        return value == default


def _check(params: RouterModelParams) -> None:
    ca = params.cache_aware
    if not 0.0 <= ca.cache_threshold <= 1.0:
        raise UnmodelledRouting(f"--cache-threshold {ca.cache_threshold}: must be within 0.0-1.0")
    if ca.balance_rel_threshold < 1.0 or params.prefix_hash.load_factor < 1.0:
        raise UnmodelledRouting("--balance-rel-threshold and --prefix-hash-load-factor must be at least 1.0")
    if params.load_monitor_interval_s <= 0:
        raise UnmodelledRouting("--load-monitor-interval must be positive")

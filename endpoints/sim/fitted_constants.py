"""The cost model's constants per vendor, as plain data (read by profiles.cost_constants_for).

Written by bench/twin_fit.py on 2026-12-01: least squares on the log ratios twin / published of every
published figure of the fit set, points of bench/twin_published.py (the project's calibration rows):
nvidia: 7.c8, 7.c32, 7.c64; amd: 9.c4, 9.c16, 9.c64.
Every other published point is validation (bench/twin_calibration.py).
Do not edit by hand: rerun `python bench/twin_fit.py --write`.
"""

FIT_DATE = "2026-12-01"
FIT_SET: tuple[str, ...] = ("7.c8", "7.c32", "7.c64", "9.c4", "9.c16", "9.c64")

FITTED: dict[str, dict] = {
    "nvidia": {
        "sglang_version": "0.5.7",
        "memory_efficiency": 0.742,
        "gemm_efficiency": 0.361,
        "attention_efficiency": 0.361,
        "decode_layer_s": 0.0001,
        "extend_layer_s": 0.00154,
        "cold_prefill_s": 1.9,
    },
    "amd": {
        "sglang_version": "0.5.19 (ROCm)",
        "memory_efficiency": 0.9,
        "gemm_efficiency": 0.221,
        "attention_efficiency": 0.221,
        "decode_layer_s": 0.000224,
        "extend_layer_s": 0.00651,
        "cold_prefill_s": 3.35,
    },
}

# What the stored constants give for the fit set (metric -> value), so a test can check they reproduce.
FIT_PREDICTIONS: dict[str, dict[str, float]] = {
    "7.c8": {
        "THROUGHPUT": 148.4581916613615,
        "TTFT": 336.77022351241715,
        "TPOT": 12.765735568142315,
        "P99_TTFT": 2091.5385040491715,
    },
    "7.c32": {
        "THROUGHPUT": 305.2427707275539,
        "TTFT": 396.0750876344147,
        "TPOT": 25.366503937360463,
        "P99_TTFT": 2397.1127747294245,
    },
    "7.c64": {
        "THROUGHPUT": 445.2818719693245,
        "TTFT": 441.4492320120168,
        "TPOT": 34.947073356015814,
        "P99_TTFT": 2900.434221087508,
    },
    "9.c4": {
        "THROUGHPUT": 231.43696000022328,
        "TTFT": 983.5875316446309,
        "TPOT": 17.659590174945297,
    },
    "9.c16": {
        "THROUGHPUT": 578.1769100112881,
        "TTFT": 1249.9952081260499,
        "TPOT": 28.954627570514,
    },
    "9.c64": {
        "THROUGHPUT": 1071.732163882479,
        "TTFT": 1854.1744503759546,
        "TPOT": 63.987625239512,
    },
}

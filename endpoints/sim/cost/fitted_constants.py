"""The cost model's constants per vendor, as plain data (read by profiles.cost_constants_for).

Written by bench/twin_fit.py on 2026-12-02: least squares on the log ratios twin / published of every
published figure of the fit set (points of endpoints/sim/calibration/published_points.py):
nvidia: 7.c8, 7.c32, 7.c64, 8.c8, 8.c32; nvidia-blackwell: 1.c1, 3.c100; amd: 9.c4, 9.c16, 9.c64.
Every other published point is validation (bench/twin_calibration.py).
Do not edit by hand: rerun `python bench/twin_fit.py --write`.
"""

FIT_DATE = "2026-12-02"
FIT_SET: tuple[str, ...] = ("7.c8", "7.c32", "7.c64", "8.c8", "8.c32", "1.c1", "3.c100", "9.c4", "9.c16", "9.c64")

FITTED: dict[str, dict] = {
    "nvidia": {
        "sglang_version": "0.5.7-0.5.19",
        "memory_efficiency": 0.735,
        "gemm_efficiency": 0.3,
        "attention_efficiency": 0.3,
        "decode_layer_s": 9.95e-05,
        "extend_layer_s": 0.00151,
        "cold_prefill_s": 1.82,
    },
    "nvidia-blackwell": {
        "sglang_version": "0.5.6.post1",
        "memory_efficiency": 0.735,
        "gemm_efficiency": 0.3,
        "attention_efficiency": 0.3,
        "decode_layer_s": 0.000133,
        "extend_layer_s": 0.0021,
        "cold_prefill_s": 1.74,
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
        "THROUGHPUT": 148.39129369373242,
        "TTFT": 329.1424981362508,
        "TPOT": 12.780304032681547,
        "P99_TTFT": 2029.5535332058384,
    },
    "7.c32": {
        "THROUGHPUT": 304.2789132341695,
        "TTFT": 395.1425771818835,
        "TPOT": 25.449869770883165,
        "P99_TTFT": 2397.2612389244077,
    },
    "7.c64": {
        "THROUGHPUT": 443.83859270035174,
        "TTFT": 444.7648654380568,
        "TPOT": 35.05931446986961,
        "P99_TTFT": 2981.9935793753066,
    },
    "8.c8": {
        "THROUGHPUT": 787.7708808758752,
        "TTFT": 605.9276894812884,
        "TPOT": 10.797006530996088,
    },
    "8.c32": {
        "THROUGHPUT": 1479.1205110978633,
        "TTFT": 942.9242105863999,
        "TPOT": 22.950487199205465,
    },
    "1.c1": {
        "THROUGHPUT": 13.61722721408832,
        "TTFT": 141.00297454321273,
    },
    "3.c100": {
        "THROUGHPUT": 265.6599499687915,
        "TTFT": 618.8875552598595,
        "TPOT": 42.76557964216002,
        "P99_TTFT": 2436.5217962102515,
    },
    "9.c4": {
        "THROUGHPUT": 231.43696000022328,
        "TTFT": 983.5875316446293,
        "TPOT": 17.659590174945297,
    },
    "9.c16": {
        "THROUGHPUT": 578.1769100112891,
        "TTFT": 1249.9952081260499,
        "TPOT": 28.954627570513942,
    },
    "9.c64": {
        "THROUGHPUT": 1071.7321638824783,
        "TTFT": 1854.174450375956,
        "TPOT": 63.98762523951204,
    },
}

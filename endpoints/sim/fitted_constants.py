"""The cost model's constants per vendor, as plain data (read by profiles.cost_constants_for).

Written by bench/twin_fit.py on 2026-12-02: least squares on the log ratios twin / published of every
published figure of the fit set, points of bench/twin_published.py (the project's calibration rows):
nvidia: 7.c8, 7.c32, 7.c64, 8.c8, 8.c32; nvidia-blackwell: 1.c1, 3.c100; amd: 9.c4, 9.c16, 9.c64.
Every other published point is validation (bench/twin_calibration.py).
Do not edit by hand: rerun `python bench/twin_fit.py --write`.
"""

FIT_DATE = "2026-12-02"
FIT_SET: tuple[str, ...] = ("7.c8", "7.c32", "7.c64", "8.c8", "8.c32", "1.c1", "3.c100", "9.c4", "9.c16", "9.c64")

FITTED: dict[str, dict] = {
    "nvidia": {
        "sglang_version": "0.5.7-0.5.19",
        "memory_efficiency": 0.714,
        "gemm_efficiency": 0.292,
        "attention_efficiency": 0.292,
        "decode_layer_s": 9.47e-05,
        "extend_layer_s": 0.0015,
        "cold_prefill_s": 1.8,
    },
    "nvidia-blackwell": {
        "sglang_version": "0.5.6.post1",
        "memory_efficiency": 0.714,
        "gemm_efficiency": 0.292,
        "attention_efficiency": 0.292,
        "decode_layer_s": 0.000133,
        "extend_layer_s": 0.00209,
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
        "THROUGHPUT": 149.8067122624589,
        "TTFT": 327.2434779634435,
        "TPOT": 12.662448277940372,
        "P99_TTFT": 2012.1611642525713,
    },
    "7.c32": {
        "THROUGHPUT": 302.2047189885692,
        "TTFT": 394.8109783886705,
        "TPOT": 25.63356974445836,
        "P99_TTFT": 2389.943053689457,
    },
    "7.c64": {
        "THROUGHPUT": 439.372699883211,
        "TTFT": 445.3868888244721,
        "TPOT": 35.42934854819589,
        "P99_TTFT": 2987.5618966184666,
    },
    "8.c8": {
        "THROUGHPUT": 790.0080237598797,
        "TTFT": 615.5822415785008,
        "TPOT": 10.774296405831102,
    },
    "8.c32": {
        "THROUGHPUT": 1464.624849572749,
        "TTFT": 950.3054342612527,
        "TPOT": 23.17904095382,
    },
    "1.c1": {
        "THROUGHPUT": 13.583753988886759,
        "TTFT": 140.77247379448494,
    },
    "3.c100": {
        "THROUGHPUT": 263.2145211339373,
        "TTFT": 620.2008704944581,
        "TPOT": 43.16137115650513,
        "P99_TTFT": 2443.2458180242315,
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

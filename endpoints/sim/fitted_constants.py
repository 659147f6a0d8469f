"""The cost model's constants per vendor, as plain data (read by profiles.cost_constants_for).

Set by hand from calibration rows 1-2 and row 6 (docs/twin.md) before bench/twin_fit.py existed; the fit
script rewrites this file.
"""

FIT_DATE = None
FIT_SET: tuple[str, ...] = ()

FITTED: dict[str, dict] = {
    "nvidia": {
        "sglang_version": "0.5.6.post1",
        "memory_efficiency": 0.6,
        "gemm_efficiency": 0.27,
        "attention_efficiency": 0.27,
        "decode_layer_s": 130e-6,
        "extend_layer_s": 2.0e-3,
    },
    "amd": {
        "sglang_version": "0.5.6.post1",
        "memory_efficiency": 0.6,
        "gemm_efficiency": 0.27,
        "attention_efficiency": 0.27,
        "decode_layer_s": 130e-6,
        "extend_layer_s": 2.0e-3,
    },
}

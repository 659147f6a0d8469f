"""The expert exchange's constants (profiles.CostConstants: a2a_layer_s, link_efficiency), one set
for every vendor, as plain data. Written by bench/twin_ep_fit.py on 2026-12-06: least squares on the log ratios
twin / published of the throughput per GPU of the fit set below, with the single-node constants
(fitted_constants.py) held. Do not edit by hand: rerun `python bench/twin_ep_fit.py --write`.
"""

FIT_DATE = "2026-12-06"
FIT_SET: tuple[str, ...] = ("6.prefill1k", "6.prefill2k", "6.prefill4k", "11.decode", "12.prefill", "12.decode")

FITTED_EP: dict[str, float] = {"a2a_layer_s": 8.32e-05, "link_efficiency": 1.0}

# What the stored constants give for the fit set (metric -> value), so a test can check they reproduce.
FIT_PREDICTIONS: dict[str, dict[str, float]] = {
    "6.prefill1k": {"THROUGHPUT": 7203.016932179751},
    "6.prefill2k": {"THROUGHPUT": 6782.177087805855},
    "6.prefill4k": {"THROUGHPUT": 6072.589023857374},
    "11.decode": {"THROUGHPUT": 8423.460186389046},
    "12.prefill": {"THROUGHPUT": 14127.686464963463},
    "12.decode": {"THROUGHPUT": 8423.460186389046},
}

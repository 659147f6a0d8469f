"""Calibration row 8's MTP acceptance length, fitted (plain data; bench/twin_spec_fit.py --write rewrites the
last line). Mean tokens per verify step, bonus token included, on InferenceX's random 8k/1k prompts with
EAGLE over DeepSeek-R1-0528's MTP head at 2 steps; fitted on the mean TPOT of the points below against
the cost constants of endpoints/sim/cost/fitted_constants.py, so refit whenever those change.
"""

ROW8_FIT_KEYS = ("8.c8", "8.c32")
ROW8_SPEC_ACCEPT_LENGTH = 2.332  # fitted 2026-12-02 by bench/twin_spec_fit.py

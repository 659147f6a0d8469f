"""The cost of one forward step: the roofline cost model, hardware and model profiles, expert parallelism, cold
start and run-to-run variation, with the constants fitted on published figures (sim/calibration/ fits them)."""

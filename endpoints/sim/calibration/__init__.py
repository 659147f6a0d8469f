"""The twin checked against published figures: the published points, run on the engine in virtual time as their
publishers measured them, and the fit and validation tables (the constants the fit writes live in sim/cost/)."""

"""Capacity at the SLO and the fleet plan: load sweeps that drive the twin's engines (and the router's policy
model) in virtual time, for one server, a fleet behind a router or a prefill/decode fleet (one Deployment type),
and the shadow twin of a real endpoint."""

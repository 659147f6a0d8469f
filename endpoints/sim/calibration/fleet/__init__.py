"""Fleets on the virtual clock: a fleet's capacity at the SLO (replicas and PD shapes), the routing reference, and
the fleet plan's search over shapes (replicas, xP+yD, wide expert-parallel decode workers)."""

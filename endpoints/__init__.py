"""The servers a replay is pointed at. Here: endpoint specs, provisioning (sim, launch, attach), process
groups and their lease file, the config fingerprint; probes/ (what a run observes of its server); sim/ (the
SGLang twin)."""

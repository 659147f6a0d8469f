"""The servers a replay is pointed at. Here: endpoint specs, provisioning (sim, launch, attach), process
groups and their lease file, the config fingerprint, the clock the twin and the router's model share. Rooms,
lowest first: probes/ (what a run observes of its server); router/ (SGLang's router, launched and modelled); sim/
(the SGLang twin); capacity/ (capacity at the SLO and the fleet plan, driving sim/'s engines and router/'s model)."""

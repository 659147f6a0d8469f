"""What a run observes of its server: /server_info, /metrics, GPU samplers, the pre-run probes."""

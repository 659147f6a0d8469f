"""SGLang's router in front of a fleet's replicas: its command line, and its policies modelled for the virtual clock."""

"""What a step costs and how that was fitted: roofline cost model, hardware and model profiles, fitted
constants, and the virtual-time benchmarks that check them."""

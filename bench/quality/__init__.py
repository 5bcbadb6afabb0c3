"""Quality benchmarks: recall on LoCoMo, MADial and coding workloads, tuning, token economy, secrets detection."""

"""Latency and throughput benchmarks: recall, writes, fleets of writers, startup, caches, the bridge."""

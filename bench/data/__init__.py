"""Workload loaders and generators the benchmarks share (the evaluation data itself is not shipped)."""

"""Scale benchmarks: stores of 10k to 1M memories, SQLite and PostgreSQL (python -m bench.scale.run)."""

"""Doctor: do Chroma, the lexical indexes and the graph agree; are secrets redacted and version chains
sound? :func:`run.check_stores` reports, :func:`run.repair_stores` mends (crash-safe); the scans are read-only."""

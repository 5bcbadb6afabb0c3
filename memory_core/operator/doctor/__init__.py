"""Doctor: do Chroma, the lexical indexes and the graph agree; are secrets redacted and version chains
sound? :func:`run.check` reports, :func:`run.repair` mends (crash-safe); the scans are read-only."""

"""Moving memory in: memory-core's own JSONL export (:mod:`.jsonl`) and the formats of other tools."""

"""Sessions: episodes (summaries of sessions), handoff chains and post-compaction recovery."""

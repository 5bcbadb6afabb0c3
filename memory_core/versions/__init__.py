"""Corrections with history, and locks: version chains of memories."""

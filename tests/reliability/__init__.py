"""Reliability harness: load, fuzzing and tenant isolation over the MCP surface (issue 7)."""

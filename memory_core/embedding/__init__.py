"""Embedders: the Protocol, the offline local default, remote models and a deterministic fake."""

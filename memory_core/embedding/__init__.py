"""Embedders: the Protocol (``api.py``), the local models and the deterministic fake (``local.py``), remote
models through the provider client (``remote.py``)."""

"""Vector stores: the Protocol, Chroma (embedded or client/server), the in-memory fake and the wrappers."""

"""stdio clients sharing one server per data directory: the bridge, its auth and the shared server."""

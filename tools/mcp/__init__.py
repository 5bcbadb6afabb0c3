"""The MCP server: its tools (declared in :mod:`tools.registry`), the per-connection surface and the preview tier."""

"""The MCP server: its tools, their registry, the per-connection surface and the preview tier."""

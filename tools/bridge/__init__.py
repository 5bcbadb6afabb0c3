"""The stdio client: ``memory-core serve`` bridged to its data directory's shared server, without the MCP SDK."""

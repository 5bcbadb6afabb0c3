"""The MCP tool functions, one module per group: each parses, calls the service once and shapes."""

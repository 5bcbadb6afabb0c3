"""Boundary layers over ``memory_core``: the MCP server (``tools.mcp.server``) and the operator CLI.

Only this package shapes results for agents (the preview tier, ``tools.mcp.preview``) and maps
errors to transport answers; ``memory_core`` and ``graph`` never import it.
"""

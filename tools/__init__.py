"""Boundary layers over ``memory_core``: the MCP server (``tools.mcp_server``) and the operator CLI.

Only this package shapes results for agents (the preview tier, ``tools.preview``) and maps
errors to transport answers; ``memory_core`` and ``graph`` never import it.
"""

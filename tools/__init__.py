"""Boundary layers over ``memory_core``: the MCP server (``tools.mcp``), the processes serving it
(``tools.serve``), the stdio bridge to a shared server (``tools.bridge``), the operator CLI
(``tools.cli``) and the web inspector (``tools.ui``).

Only this package shapes results for agents (the preview tier, ``tools.mcp.preview``) and maps
errors to transport answers; ``memory_core`` and ``graph`` never import it.
"""

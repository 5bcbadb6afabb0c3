"""The operator CLI, ``memory-core``: a thin Typer boundary over ``memory_core``.

One module per command group (``memories``, ``inspect``, ``transfer``, ``maintenance``,
``serve``); ``common`` holds the shared options and the one error mapping, ``render``
the tables and JSON output. Commands call the same service API as the MCP server.
"""

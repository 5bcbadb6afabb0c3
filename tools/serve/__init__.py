"""The serving processes: ``memory-core serve`` run in this process, over stdio or streamable HTTP.

- :mod:`tools.serve.stdio` — one client over stdin/stdout, the stores in this process (``--exclusive``);
- :mod:`tools.serve.http` — streamable HTTP at ``/mcp`` with the inspector at ``/ui``, behind the
  HTTP guard, with bearer tokens and bridged clients' authentication (:mod:`tools.serve.bridged`);
  the shared background server that stdio launches start is this process too (``--shared``);
- :mod:`tools.serve.deferred_core` — opening the stores: before serving, or right after answering.

This is the composition root of the MCP boundary: it reads the settings it is given, opens the
stores once and hands them to :func:`tools.mcp.server.build_server`. Only the CLI (and tests)
import it; the MCP server (:mod:`tools.mcp`) and the stdio bridge (:mod:`tools.bridge`) never do.
"""

"""A listening TCP socket for the HTTP servers (MCP and the inspector), bound before uvicorn runs.

Binding first lets a server learn its port (``--port 0``) and announce it, and turns a port in
use into ``CONFIG_INVALID`` naming the setting instead of a traceback from inside uvicorn.
"""

from __future__ import annotations

import socket

from memory_core import ConfigError


def listen(host: str, port: int, *, key: str, backlog: int = 128) -> socket.socket:
    """A socket listening on ``host:port`` (IPv6 when the host has a colon); ``key`` names the setting."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on connections whose
    # socket says IPPROTO_TCP, and accepted sockets inherit proto 0 from a listener made without
    # it; with Nagle on, every response after the first on a keep-alive connection waited for the
    # client's delayed ACK (~40 ms on Linux)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"Cannot listen on {host}:{port}: {exc.strerror}.", key=key) from exc
    sock.listen(backlog)
    return sock


def url_host(sock: socket.socket, host: str) -> str:
    """``host`` as it stands in a URL: bracketed for IPv6."""
    return f"[{host}]" if sock.family == socket.AF_INET6 else host

"""The servers' listening socket: connections accepted from it are sent without Nagle's delay.

An MCP reply over streamable HTTP leaves in several writes (headers, then the event). With Nagle's
algorithm on, the second write waits for the client's delayed ACK: every tool call took ~44 ms on
loopback instead of ~2 ms. asyncio turns Nagle off on each accepted connection only when the socket
says its protocol is TCP, so the listening socket must be made with ``IPPROTO_TCP``.
"""

from __future__ import annotations

import asyncio
import socket

from tools.http.listen import listen


def test_connections_accepted_by_an_asyncio_server_on_the_listening_socket_have_nodelay() -> None:
    async def check() -> int:
        sock = listen("127.0.0.1", 0, key="server.port")
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)  # as uvicorn serves it
        try:
            _reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
            return value
        finally:
            server.close()

    assert asyncio.run(check()) != 0

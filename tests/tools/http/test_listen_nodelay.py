"""Connections accepted on a ``tools.http.listen`` socket run with Nagle's algorithm off.

asyncio sets TCP_NODELAY only on sockets whose ``proto`` is IPPROTO_TCP; a listener made
without naming it passes proto 0 to every accepted socket, and each response after the first
on a keep-alive connection then waited for the client's delayed ACK (~40 ms on Linux: the
bridge's second request on a connection, after the server's proof, cost 40 ms per call).
"""

from __future__ import annotations

import asyncio
import socket

from tools.http.listen import listen


def test_an_asyncio_server_on_a_listen_socket_turns_nagle_off_for_each_connection() -> None:
    async def main() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listen("127.0.0.1", 0, key="test"))
        async with server:
            port = server.sockets[0].getsockname()[1]
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            nodelay = await asyncio.wait_for(accepted, 10)
            writer.close()
            return nodelay

    assert asyncio.run(main()) != 0

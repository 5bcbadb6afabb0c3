"""DNS rebinding: a loopback server answers only its own Host and Origin, however it was spelled.

A web page can point a DNS name it owns at 127.0.0.1 and make the browser post to the
server; the request then carries the page's Host and Origin. The SDK checked them only for
the exact bind strings '127.0.0.1', 'localhost' and '::1', so ``--host LOCALHOST`` or
``127.0.0.2`` (started without tokens: they are loopback) answered every page. Each server
here is a real subprocess, driven over real HTTP (httpx) and the SDK's client.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from testbed.mcp_harness import ROOT, http_client, server_env
from tests.support.http_raw import RawSession, serving
from tools.http.guard import HostPolicy, normalize_host


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _add(content: str) -> dict[str, Any]:
    return {"tenant": "acme", "session": "rebinding", "agent": "page", "content": content}


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["data"]["code"] == code and body["error"]["message"].endswith(".")


async def _stored(url: str) -> list[str]:
    async with http_client(url, None) as client:
        page = await client.call_tool("query_recent_turns", {"tenant": "acme", "session": "rebinding"})
    assert page.structured_content is not None
    return [turn["content"] for turn in page.structured_content["turns"]]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("host", ["LOCALHOST", "Localhost", "127.0.0.2", "127.0.0.1", "::1"])
async def test_a_foreign_host_or_origin_is_refused_before_any_tool_runs(host: str, tmp_path: Path) -> None:
    with serving(host, tmp_path / "data") as url:
        port = urlsplit(url).port
        raw = RawSession(url)
        _refused(raw.call("add_memory", _add("via a rebound name"), host=f"attacker.example:{port}"), 421,
                 "HOST_NOT_ALLOWED")  # fmt: skip
        _refused(raw.call("add_memory", _add("from a foreign page"), origin="http://attacker.example"), 403,
                 "ORIGIN_NOT_ALLOWED")  # fmt: skip
        _refused(raw.call("add_memory", _add("from a sandboxed page"), origin="null"), 403, "ORIGIN_NOT_ALLOWED")
        _refused(raw.call("recall", {"tenant": "acme", "query": "x"}, host=f"attacker.example:{port}"), 421,
                 "HOST_NOT_ALLOWED")  # fmt: skip
        wrong_port = f"{urlsplit(url).netloc.rsplit(':', 1)[0]}:{port + 1 if port < 65535 else 1}"
        _refused(raw.call("recall", {"tenant": "acme", "query": "x"}, host=wrong_port), 421, "HOST_NOT_ALLOWED")
        assert await _stored(url) == []

        own_origin = f"http://{urlsplit(url).netloc.swapcase()}"  # case never matters
        allowed = raw.call("add_memory", _add("from our own origin"), origin=own_origin)
        assert allowed.status_code == 200 and '"isError":false' in allowed.text.replace(" ", ""), allowed.text
        assert await _stored(url) == ["from our own origin"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_localhost_reaches_a_127_0_0_1_server_but_not_a_127_0_0_2_one(tmp_path: Path) -> None:
    with serving("127.0.0.2", tmp_path / "a") as url:
        port = urlsplit(url).port
        raw = RawSession(url)
        _refused(raw.call("recall", {"tenant": "acme", "query": "x"}, host=f"localhost:{port}"), 421,
                 "HOST_NOT_ALLOWED")  # fmt: skip
        _refused(raw.call("recall", {"tenant": "acme", "query": "x"}, host=f"127.0.0.1:{port}"), 421,
                 "HOST_NOT_ALLOWED")  # fmt: skip
    with serving("127.0.0.1", tmp_path / "b") as url:
        port = urlsplit(url).port
        raw = RawSession(url)
        ok = raw.call("recall", {"tenant": "acme", "query": "x"}, host=f"LocalHost:{port}",
                      origin=f"http://localhost:{port}")  # fmt: skip
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    ("bind", "header", "allowed"),
    [
        ("LOCALHOST", "localhost:8765", True),
        ("LOCALHOST", "LOCALHOST:8765", True),
        ("localhost", "127.0.0.1:8765", True),
        ("127.0.0.1", "localhost:8765", True),
        ("::1", "[::1]:8765", True),
        ("::1", "[0:0:0:0:0:0:0:1]:8765", True),
        ("127.0.0.2", "127.0.0.2:8765", True),
        ("127.0.0.2", "localhost:8765", False),
        ("127.0.0.1", "127.0.0.1", False),  # no port means 80
        ("127.0.0.1", "127.0.0.1:8766", False),
        ("127.0.0.1", "127.0.0.1:08765x", False),
        ("127.0.0.1", "127.0.0.1:", False),
        ("::1", "[::1]8765", False),
        ("::1", "::1:8765", False),
        ("127.0.0.1", "attacker.example:8765", False),
        ("127.0.0.1", "localhost.:8765", False),
        ("127.0.0.1", "127.0.0.1.attacker.example:8765", False),
        ("127.0.0.1", "", False),
    ],
)
def test_the_host_header_must_name_the_bound_loopback_address_and_port(bind: str, header: str, allowed: bool) -> None:
    policy = HostPolicy.for_bind(bind, 8765)
    assert policy is not None
    assert policy.allows_host(header) is allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),
        ("http://127.0.0.1:8765", True),
        ("HTTP://LOCALHOST:8765", True),
        ("null", False),
        ("", False),
        ("https://127.0.0.1:8765", False),
        ("http://127.0.0.1:8766", False),
        ("http://attacker.example:8765", False),
        ("http://127.0.0.1:8765@attacker.example", False),
        ("file://", False),
    ],
)
def test_an_origin_other_than_the_servers_own_is_refused(origin: str | None, allowed: bool) -> None:
    policy = HostPolicy.for_bind("127.0.0.1", 8765)
    assert policy is not None
    assert policy.allows_origin(origin) is allowed


def test_hosts_are_compared_after_normalising_case_and_ipv6_brackets() -> None:
    assert normalize_host("LocalHost") == "localhost"
    assert normalize_host("::1") == normalize_host("[0::1]") == "[::1]"
    assert HostPolicy.for_bind("0.0.0.0", 8765) is None  # beyond loopback, bearer tokens guard the server


@pytest.mark.slow
@pytest.mark.anyio
async def test_memory_core_serve_with_host_in_capitals_refuses_a_rebinding_page(tmp_path: Path) -> None:
    """The attack's own command line: ``memory-core serve --http --host LOCALHOST`` (no tokens)."""
    binary = Path(sys.executable).with_name("memory-core")
    proc = subprocess.Popen(
        [str(binary), "serve", "--http", "--host", "LOCALHOST", "--port", "0", "--announce", "--json",
         "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        port = urlsplit(url).port
        raw = RawSession(url)
        _refused(raw.call("add_memory", _add("planted by a page"), host=f"attacker.example:{port}",
                          origin="http://attacker.example"), 421, "HOST_NOT_ALLOWED")  # fmt: skip
        _refused(raw.call("recall", {"tenant": "acme", "query": "x"}, origin=f"http://attacker.example:{port}"), 403,
                 "ORIGIN_NOT_ALLOWED")  # fmt: skip
        assert await _stored(url) == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)

"""/healthz and /readyz: cheap, unauthenticated, revealing nothing, and honest about what blocks writes.

In process over a real store (HashEmbedder, embedded Chroma) through the probes' ASGI app, then once
against a real ``memory-core serve --http`` with tokens, as an orchestrator's probe would hit it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import StoreError
from memory_core.operator.doctor import run as doctor_run
from memory_core.settings import load_settings
from testbed.mcp_harness import running_http_server, write_token_config
from tools.mcp.stores import OpenedCore
from tools.serve.deferred_core import DeferredCore
from tools.serve.probes import ProbeRoutes, Readiness

TENANT, CONTENT = "acme-probe-tenant", "the zebra crossing on Elm Street was repainted"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _nothing(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("a probe reached the app behind it")


@pytest.fixture
def core(tmp_path: Path) -> Iterator[MemoryCore]:
    settings = load_settings(environ={})
    with MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder()) as c:
        c.add_memory(tenant=TENANT, session="s1", agent="a1", content=CONTENT)
        yield c


def _warm(core: MemoryCore, **options: float) -> tuple[Readiness, TestClient]:
    readiness = Readiness(OpenedCore(core), **options)
    readiness.warm_up(core)
    for thread in readiness._warming or []:
        thread.join(60)
    return readiness, TestClient(ProbeRoutes(_nothing, readiness))


def _ready(client: TestClient) -> tuple[int, dict[str, Any]]:
    response = client.get("/readyz")
    assert response.headers["cache-control"] == "no-store"
    return response.status_code, response.json()


def test_healthz_is_alive_and_readyz_waits_for_the_warm_up(core: MemoryCore) -> None:
    readiness = Readiness(OpenedCore(core))
    client = TestClient(ProbeRoutes(_nothing, readiness))
    assert client.get("/healthz").json() == {"status": "alive"}
    status, body = _ready(client)
    assert status == 503 and body["checks"]["model"] == "loading"
    readiness.warm_up(core)
    for thread in readiness._warming or []:
        thread.join(60)
    assert _ready(client) == (200, {"status": "ready", "checks": {
        "stores": "ok", "migrations": "ok", "data_dir": "ok", "model": "ok", "writer": "ok"}})


def test_probes_reveal_no_tenant_content_or_path(core: MemoryCore, tmp_path: Path) -> None:
    _, client = _warm(core)
    for path in ("/healthz", "/readyz"):
        text = client.get(path).text
        assert TENANT not in text and "zebra" not in text and str(tmp_path) not in text


def test_probes_answer_get_and_head_only(core: MemoryCore) -> None:
    _, client = _warm(core)
    head = client.head("/readyz")
    assert head.status_code == 200 and head.content == b""
    refused = client.post("/healthz", content=b"{}")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def test_readyz_fails_while_a_repair_holds_the_writer_lock(core: MemoryCore, monkeypatch: pytest.MonkeyPatch) -> None:
    _, client = _warm(core)
    inside, release = threading.Event(), threading.Event()
    scan = doctor_run.scan

    def slow_scan(parts: Any) -> Any:
        inside.set()
        release.wait(30)
        return scan(parts)

    monkeypatch.setattr(doctor_run, "scan", slow_scan)
    repairing = threading.Thread(target=doctor_run.repair_stores, args=(core.operator_parts(),))
    repairing.start()
    try:
        assert inside.wait(30)
        status, body = _ready(client)
        assert status == 503 and body["checks"]["writer"] == "busy: repair"
    finally:
        release.set()
        repairing.join(60)
    assert _ready(client)[0] == 200


def test_readyz_fails_while_anything_holds_the_writer_lock_too_long(core: MemoryCore) -> None:
    _, client = _warm(core, writer_busy_s=0.2)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with core.operator_parts().writer.lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        assert _ready(client)[0] == 200  # a write holds it for milliseconds: no flapping
        time.sleep(0.3)
        status, body = _ready(client)
        assert status == 503 and body["checks"]["writer"] == "busy"
    finally:
        release.set()
        holder.join(10)
    assert _ready(client)[0] == 200


def test_readyz_fails_when_the_data_directory_lock_file_was_removed_until_a_write_relocks(core: MemoryCore) -> None:
    _, client = _warm(core)
    (core.data_dir / "memory-core.lock").unlink()
    status, body = _ready(client)
    assert status == 503 and body["checks"]["data_dir"] == "lost"
    core.add_memory(tenant=TENANT, session="s1", agent="a1", content="a write relocks the directory")
    assert _ready(client)[0] == 200


@pytest.mark.anyio
async def test_readyz_says_opening_then_the_open_error_code_never_its_message() -> None:
    def failing(_lock: object) -> MemoryCore:
        raise StoreError("The graph file /srv/secret-place/graph.sqlite3 is damaged.")

    deferred = DeferredCore(failing, None, wait_s=5)
    readiness = Readiness(deferred)
    assert readiness.checks() == {"stores": "opening"}
    async with anyio.create_task_group() as tasks:
        deferred.bind(tasks)
        deferred.begin()
        with pytest.raises(StoreError):
            await deferred.get()
    assert readiness.verdict() == (False, {"stores": "STORE_ERROR"})
    assert "secret-place" not in json.dumps(readiness.checks())
    await deferred.close()


@pytest.mark.slow
def test_a_real_server_answers_probes_without_a_token_while_mcp_needs_one(tmp_path: Path) -> None:
    config = write_token_config(tmp_path / "tokens.toml", {"tok-acme": "acme"})
    with running_http_server(tmp_path / "data", config=config) as url:
        base = url.removesuffix("/mcp")
        assert httpx.get(f"{base}/healthz").json() == {"status": "alive"}
        deadline = time.monotonic() + 60
        ready = httpx.get(f"{base}/readyz")
        while ready.status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert httpx.post(url, json={}).status_code == 401  # the MCP endpoint still needs its token

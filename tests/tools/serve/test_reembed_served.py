"""``memory-core reembed`` while a real server holds the data directory: the server runs it, keeps answering,
switches in place, and a SIGKILL mid-build leaves the old index in use and a rerun resumes.

Everything is real: the server (``serve --http``) and the command are subprocesses, the agents are the MCP
SDK's client over streamable HTTP, the store is SQLite and embedded Chroma. The models are the hash
embedder at 64 (before) and 32 dimensions (after), so the runs are fast.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import EmbedderMismatchError
from memory_core.operator.reembedding import BUILD, VECTOR_PREFIX
from testbed.mcp_harness import error_code, http_client
from testbed.paths import ROOT
from testbed.processes import stop, stop_shared_servers
from tests.support.reembed_stores import (
    TENANTS,
    cli,
    cli_env,
    embedded_with_the_model,
    fill,
    open_store,
    same_as_fresh,
)
from tests.support.restartable import RestartableServer
from tools.server_record import REEMBED_PATH, operator_token, read_announcement

pytestmark = pytest.mark.slow


def drained(server: RestartableServer) -> None:
    """Read the server's output as it comes (a full pipe would stop it)."""
    out = server.proc.stdout if server.proc is not None else None
    if out is not None:
        threading.Thread(target=lambda: [None for _ in out], daemon=True).start()


def route(data_dir: Path, method: str, payload: dict[str, Any] | None = None,
          token: str | None = None) -> tuple[int, dict[str, Any]]:
    found = read_announcement(data_dir)
    assert found is not None
    conn = http.client.HTTPConnection(*found.address, timeout=30)
    try:
        conn.request(method, REEMBED_PATH, body=None if payload is None else json.dumps(payload),
                     headers={"Authorization": f"Bearer {token or operator_token(found.secret)}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def agents_while(url: str, done: threading.Event, log: dict[str, Any]) -> None:
    """Two agents recall and write in a loop until ``done``; every failure and every row written is logged."""
    async def writer(tenant: str) -> None:
        async with http_client(url, None) as client:
            k = 0
            while not done.is_set():
                content = f"{tenant}: live note n{k}x written during the re-embed about the olive grove"
                try:
                    result = await client.call_tool("add_memory", {"tenant": tenant, "session": "live",
                                                                   "agent": "bob", "content": content})
                    if result.is_error:
                        log["failures"].append(result.content)
                    else:
                        ref = (result.structured_content or {})["ref"]
                        log["written"].append((tenant, ref, time.monotonic()))
                        log["contents"][ref] = content
                except Exception as exc:  # a dropped connection is a failure too
                    log["failures"].append(repr(exc))
                k += 1

    async def reader(tenant: str) -> None:
        async with http_client(url, None) as client:
            while not done.is_set():
                try:
                    result = await client.call_tool("recall", {"tenant": tenant, "query": "kiwi harvest port",
                                                               "limit": 5})
                    if result.is_error or not (result.structured_content or {}).get("messages"):
                        log["failures"].append(result.content)
                    else:
                        log["recalls"] += 1
                except Exception as exc:
                    log["failures"].append(repr(exc))

    await asyncio.gather(writer("acme"), reader("acme"), writer("globex"), reader("globex"))


async def recallable(url: str, rows: list[tuple[str, str, float]], contents: dict[str, str]) -> list[str]:
    """The rows a recall of their own words does not find."""
    missing = []
    async with http_client(url, None) as client:
        for tenant, ref, _ in rows:
            content = contents[ref]
            result = await client.call_tool("recall", {"tenant": tenant, "query": content, "limit": 3,
                                                       "session": "live"})
            assert not result.is_error, result.content
            if content not in [m["content"] for m in (result.structured_content or {})["messages"]]:
                missing.append(content)
    return missing


def test_a_reembed_runs_in_the_serving_process_while_agents_recall_and_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(data, 1500)
    server = RestartableServer(data)
    server.start()
    drained(server)
    try:
        done, log = threading.Event(), {"failures": [], "written": [], "recalls": 0, "contents": {}}
        agents = threading.Thread(target=lambda: asyncio.run(agents_while(server.url, done, log)))
        agents.start()
        while len(log["written"]) < 3:  # the agents are at work before the command starts
            time.sleep(0.05)
        started = time.monotonic()
        run = cli("reembed", "--model", "hash:32", "--data-dir", str(data), "--json", dimension=64)
        ended = time.monotonic()
        time.sleep(1.0)  # and go on after the switch
        done.set()
        agents.join(60)
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert report["switched"] and report["to"] == "hash-bow/32" and report["prefix"] == "mcr1"
        assert report["settings"] == {"provider": "hash", "dimension": 32}
        assert log["failures"] == [], log["failures"][:3]
        during = [w for w in log["written"] if started <= w[2] <= ended]
        assert len(during) >= 5 and log["recalls"] >= 10, (len(during), log["recalls"])
        # the server answers with the new model now: a row written during the build is found by its words
        assert asyncio.run(recallable(server.url, during[:5], log["contents"])) == []
        status, state = route(data, "GET")
        assert status == 200 and state["state"] == "done" and state["progress"]["total"] > 0
    finally:
        server.stop()
    with pytest.raises(EmbedderMismatchError):  # the configuration's old model no longer opens it
        open_store(data, 64)
    with open_store(data, 32) as core:  # every row the agents wrote is in the new index, under the new model
        embedded_with_the_model(core, 32)
        held = {t: core.operator_parts().vectors.all_ids(t) for t in TENANTS}
        assert all(ref in held[tenant] for tenant, ref, _ in log["written"])
    same_as_fresh(data, tmp_path, 32)


def test_the_route_takes_only_the_operator_token_of_the_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(data, 5)
    server = RestartableServer(data)
    server.start()
    drained(server)
    try:
        assert route(data, "GET", token="mco1.forged")[0] == 401
        assert route(data, "POST", {"model": "hash:32"}, token="not-a-token")[0] == 401
        assert route(data, "GET") == (200, {"state": "idle"})
        status, bad = route(data, "POST", {"model": "word2vec"})
        assert status == 202
        while bad["state"] == "running":
            time.sleep(0.05)
            bad = route(data, "GET")[1]
        assert bad["state"] == "failed" and bad["error"]["code"] == "INVALID_INPUT"
        assert route(data, "POST", {"modl": "hash:32"})[0] == 400
        same = cli("reembed", "--model", "hash:64", "--data-dir", str(data), "--json", dimension=64)
        assert (same.returncode, json.loads(same.stdout)["error"]["code"]) == (2, "INVALID_INPUT")  # as run here
    finally:
        server.stop()
    with open_store(data, 64) as core:  # nothing was switched
        assert not core.operator_parts().graph.meta(VECTOR_PREFIX)


def test_a_server_killed_mid_build_keeps_the_old_index_and_a_rerun_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(data, 2500)
    with open_store(data, 64) as core:
        before = {t: [m.content for m in core.recall(t, "kiwi harvest port 5017", limit=8).messages] for t in TENANTS}
    server = RestartableServer(data)
    server.start()
    drained(server)
    try:
        status, state = route(data, "POST", {"model": "hash:32"})
        assert status == 202
        while not state["progress"].get("done"):
            assert state["state"] == "running", state  # caught mid-build, or the test cannot say anything
            time.sleep(0.01)
            state = route(data, "GET")[1]
        server.kill()
    finally:
        server.stop()
    total = 2 * 2500
    with open_store(data, 64) as core:  # the old model opens it and answers as before
        graph = core.operator_parts().graph
        assert json.loads(graph.meta(BUILD) or "{}").get("prefix") == "mcr1" and not graph.meta(VECTOR_PREFIX)
        assert {t: [m.content for m in core.recall(t, "kiwi harvest port 5017", limit=8).messages]
                for t in TENANTS} == before
        core.add_memory("acme", "s9", "ann", "acme: written between the kill and the rerun, about the olive grove")
    server.start()
    drained(server)
    try:
        run = cli("reembed", "--model", "hash:32", "--data-dir", str(data), "--json", dimension=64)
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert report["resumed"] and report["switched"]
        assert 0 < sum(report["embedded"].values()) < total + 1  # only what the killed build had not embedded
    finally:
        server.stop()
    same_as_fresh(data, tmp_path, 32)


def test_the_direct_command_killed_at_several_points_ends_like_a_fresh_import(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(data, 2500)
    partial = 0
    delay = 1.0
    for _attempt in range(12):
        proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "reembed", "--model", "hash:32", "--data-dir",
                                 str(data), "--json"], cwd=ROOT, env=cli_env(64), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL: no cleanup
            proc.wait()
        finally:
            stop(proc)
        with open_store(data, 64, check_embedder_model=False) as core:
            graph = core.operator_parts().graph
            if graph.meta(VECTOR_PREFIX):
                break  # this run switched
            if graph.meta(BUILD):
                partial += 1
        delay *= 1.4
    else:
        pytest.fail("the command never finished")
    assert partial >= 1  # at least one kill hit the build itself
    with pytest.raises(EmbedderMismatchError):
        open_store(data, 64)
    same_as_fresh(data, tmp_path, 32)


def test_the_shared_server_runs_it_and_does_not_stop_for_being_idle_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.bridge.locate import ensure_shared_server

    data = tmp_path / "data"
    fill(data, 1500)
    for key, value in {"MEMORY_CORE_EMBEDDING_PROVIDER": "hash", "MEMORY_CORE_SERVER_SHARED_IDLE_S": "3"}.items():
        monkeypatch.setenv(key, value)
    ensure_shared_server(data, None)
    try:
        status, state = route(data, "POST", {"model": "hash:32"})
        assert status == 202
        while state["state"] == "running":
            time.sleep(0.1)
            state = route(data, "GET")[1]
        assert state["state"] == "done" and state["report"]["switched"], state
        time.sleep(4)  # past shared_idle_s without a client: the finished run's report is still there to read
        assert route(data, "GET")[1]["state"] == "done"
    finally:
        stop_shared_servers(data)  # SIGKILL, after the switch
    same_as_fresh(data, tmp_path, 32)


@pytest.mark.postgres
@pytest.mark.chroma_server
def test_replicas_the_one_that_ran_it_switches_the_others_answer_embedder_mismatch(
        tmp_path: Path, postgres_dsn: str, chroma_server: tuple[str, int]) -> None:
    from testbed.postgres import fresh_database

    env = {"MEMORY_CORE_STORAGE_GRAPH": "postgres", "MEMORY_CORE_STORAGE_POSTGRES_DSN": fresh_database(postgres_dsn),
           "MEMORY_CORE_STORAGE_CHROMA": "http", "MEMORY_CORE_STORAGE_CHROMA_HOST": chroma_server[0],
           "MEMORY_CORE_STORAGE_CHROMA_PORT": str(chroma_server[1]),
           "MEMORY_CORE_STORAGE_COLLECTION_PREFIX": "rr" + secrets.token_hex(3)}
    first, other = RestartableServer(tmp_path / "a", **env), RestartableServer(tmp_path / "b", **env)
    first.start()
    other.start()
    drained(first)
    drained(other)

    async def call(url: str, tool: str, **arguments: Any) -> Any:
        async with http_client(url, None) as client:
            return await client.call_tool(tool, {"tenant": "acme", **arguments})

    try:
        for i in range(10):
            done = asyncio.run(call((first, other)[i % 2].url, "add_memory", session="s1", agent="ann",
                                    content=f"kiwi orchard note {i}"))
            assert not done.is_error, done.content
        run = cli("reembed", "--model", "hash:32", "--data-dir", str(tmp_path / "a"), "--json", dimension=64, env=env)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["switched"]
        found = asyncio.run(call(first.url, "recall", query="kiwi orchard", limit=20))
        assert not found.is_error and len(found.structured_content["messages"]) == 10  # type: ignore[index]
        time.sleep(2.2)  # the other replica reads the store's record at most every 2 s for its reads
        for tool, arguments in (("recall", {"query": "kiwi orchard"}),
                                ("add_memory", {"session": "s1", "agent": "bob", "content": "into the old index"})):
            refused = asyncio.run(call(other.url, tool, **arguments))
            assert error_code(refused) == "EMBEDDER_MISMATCH", refused.content
        after = asyncio.run(call(first.url, "add_memory", session="s1", agent="ann", content="kiwi after"))
        assert not after.is_error, after.content  # the replica that ran it writes on, with the new model
    finally:
        first.stop()
        other.stop()

"""The inspector as operators start it: mounted by `serve --http` next to /mcp, alone with
`memory-core ui` (real subprocesses, real HTTP), and the `token --operator` command."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memory_core.settings import load_settings
from testbed.mcp_harness import running_http_server
from tests.support.ui_store import AGENT_TOKEN, OPERATOR_TOKEN, make_store, running_ui
from tools.auth import hash_token
from tools.cli.app import app

runner = CliRunner()


def _wait_ok(url: str, headers: dict[str, str]) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, headers=headers, timeout=10)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_serve_http_mounts_the_inspector_next_to_mcp(tmp_path: Path) -> None:
    data, config, _refs = make_store(tmp_path)
    with running_http_server(data, config=config) as mcp_url:
        base = mcp_url.rsplit("/mcp", 1)[0]
        r = _wait_ok(f"{base}/ui/tenant?t=acme", {"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        assert r.status_code == 200 and ">s1<" in r.text
        assert httpx.get(f"{base}/ui/", headers={"Authorization": f"Bearer {AGENT_TOKEN}"}).status_code == 403
        assert httpx.get(f"{base}/ui/").status_code == 401
        # the MCP endpoint is still there, and the operator token is not an agent token for it
        assert httpx.post(mcp_url, json={}, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}).status_code == 401


@pytest.mark.slow
def test_memory_core_ui_serves_the_inspector_alone_on_loopback(tmp_path: Path) -> None:
    data, config, _refs = make_store(tmp_path)
    with running_ui(data, config) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/ui/")
        r = _wait_ok(url, {"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        assert r.status_code == 200 and "acme" in r.text
        base = url.rsplit("/ui/", 1)[0]
        assert httpx.post(f"{base}/mcp", json={}).status_code == 404
        assert httpx.get(f"{base}/", follow_redirects=False).headers["location"] == "/ui/"


@pytest.mark.slow
def test_memory_core_ui_refuses_other_hosts_and_a_store_without_an_operator_token(tmp_path: Path) -> None:
    data, config, _refs = make_store(tmp_path)
    result = runner.invoke(app, ["ui", "--data-dir", str(data), "--config", str(config), "--host", "0.0.0.0"])
    assert result.exit_code == 5 and "loopback only" in result.output
    bare = tmp_path / "bare.toml"
    bare.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["ui", "--data-dir", str(data), "--config", str(bare), "--json"])
    assert result.exit_code == 5 and "memory-core token --operator" in result.output


@pytest.mark.slow
def test_token_operator_prints_a_fresh_token_and_its_config_line() -> None:
    first = runner.invoke(app, ["token", "--operator", "--json"])
    second = runner.invoke(app, ["token", "--operator", "--json"])
    assert first.exit_code == 0
    a, b = json.loads(first.output), json.loads(second.output)
    assert a["token"] != b["token"] and len(a["token"]) >= 40
    assert a["operator_token_sha256"] == hash_token(a["token"])
    assert a["config_line"] == f'operator_token_sha256 = "{hash_token(a["token"])}"'
    settings = load_settings(environ={}, overrides={"server": {"operator_token_sha256": a["operator_token_sha256"]}})
    assert settings.server.operator_token_sha256 == a["operator_token_sha256"]
    human = runner.invoke(app, ["token", "--operator"])
    assert "operator_token_sha256 = " in human.output and "shown once" in human.output
    assert runner.invoke(app, ["token"]).exit_code == 2

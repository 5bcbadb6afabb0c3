"""A request over the server's body limit, through the stdio bridge: its own code, and nothing applied.

Before, the bridge sent the body, the server refused it unread and closed, and the client got
"SERVER_UNAVAILABLE … may have been applied, retry" — forever, since a retry fails the same way.
Real subprocesses: the bridge, written to as raw lines, and the shared server it starts (which
inherits the test's ``server.max_request_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.raw_bridge import RawBridge, tool_error
from tests.tools.bridge.test_shared_server import stop_servers
from tools.bridge.locate import ensure_shared_server
from tools.server_record import ANNOUNCEMENT

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

LIMIT = 100_000
LIMITS = {"MEMORY_CORE_SERVER_MAX_REQUEST_BYTES": str(LIMIT), "MEMORY_CORE_SERVER_SHARED_IDLE_S": "30"}


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


def _assert_refused_and_nothing_applied(bridge: RawBridge) -> None:
    big = bridge.wait_for(bridge.call("add_memory", session="s", agent="a", content="x" * (LIMIT + 50_000)))
    error = tool_error(big)
    assert error is not None and error["code"] == "REQUEST_TOO_LARGE", big
    assert error["may_have_been_applied"] is False and "nothing was applied" in error["message"].lower(), error
    assert "max_request_bytes" in error["message"]
    small = bridge.wait_for(bridge.call("add_memory", session="s", agent="a", content="a small fact"))
    assert tool_error(small) is None and small["result"]["structuredContent"]["ref"] == "mem:1"  # the big one: never


def test_a_request_over_the_servers_limit_is_refused_with_its_code_and_not_sent(data_dir: Path) -> None:
    bridge = RawBridge(data_dir, MEMORY_CORE_TENANT="acme", **LIMITS)
    try:
        bridge.handshake()
        _assert_refused_and_nothing_applied(bridge)
        assert bridge.close() == 0
    finally:
        bridge.kill()
    assert bridge.stderr == ""


def test_a_server_whose_record_does_not_state_its_limit_still_gets_its_refusal_passed_on(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in {"MEMORY_CORE_EMBEDDING_PROVIDER": "hash", **LIMITS}.items():
        monkeypatch.setenv(key, value)
    ensure_shared_server(data_dir, None)
    record = json.loads((data_dir / ANNOUNCEMENT).read_text())
    del record["max_request_bytes"]  # as an older server wrote it
    (data_dir / ANNOUNCEMENT).write_text(json.dumps(record))
    bridge = RawBridge(data_dir, MEMORY_CORE_TENANT="acme", **LIMITS)
    try:
        bridge.handshake()
        _assert_refused_and_nothing_applied(bridge)
        assert bridge.close() == 0
    finally:
        bridge.kill()

"""When the shared server dies under a stdio bridge, every call still gets exactly one answer.

Real subprocesses: the bridge (``memory-core serve --data-dir``) written to and read from as raw
lines (tests/support/raw_bridge.py), the shared server it starts, and SIGKILLs of that server
while calls are in flight. A call is answered with its result, or with ``SERVER_UNAVAILABLE``
saying whether it may have been applied; the client's stderr gets one line per lost server,
never a traceback. ``MEMORY_CORE_RELIABILITY=long`` runs many more kills.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw_bridge import RawBridge, tool_error
from tests.support.store_checks import LONG
from tests.tools.bridge.test_shared_server import stop_servers
from tools.bridge.locate import is_alive
from tools.server_record import Announcement, read_announcement

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

KILLS = 12 if LONG else 2  # each restart costs a server start (~1-5 s): two keep `make test` short
CALL_GAP_S = 0.02
IN_FLIGHT = 8  # calls outstanding at once: enough to be mid-call at every kill, few enough to leave no backlog
ANSWERS_BETWEEN_KILLS = 2  # calls answered by each new server before it is killed in turn


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


def _live_server(data_dir: Path, other_than: int | None, timeout_s: float = 60.0) -> Announcement:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = read_announcement(data_dir)
        if found is not None and found.pid != other_than and is_alive(found):
            return found
        time.sleep(0.05)
    raise AssertionError("no shared server came up")


def _kill(found: Announcement) -> None:
    os.kill(found.pid, signal.SIGKILL)
    while True:  # gone (a zombie of its detached parent counts as gone once it no longer answers)
        try:
            os.kill(found.pid, 0)
        except ProcessLookupError:
            return
        if not is_alive(found, timeout_s=0.2):
            return
        time.sleep(0.02)


def _assert_one_line_per_loss(stderr: str, killed: list[int]) -> None:
    assert "Traceback" not in stderr and 'File "' not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == len(killed), stderr
    for line, pid in zip(lines, killed, strict=True):
        assert line.startswith("memory-core: ") and f"pid {pid}" in line, stderr


@pytest.mark.timeout(900 if LONG else 300)
def test_every_call_gets_one_answer_and_stderr_one_line_while_the_shared_server_is_killed_again_and_again(
    data_dir: Path,
) -> None:
    bridge = RawBridge(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_SERVER_SHARED_IDLE_S="30")
    sent: dict[int, dict[str, Any]] = {}
    stop_sending = threading.Event()

    def send_calls() -> None:
        n = 0
        while not stop_sending.is_set():
            if len(sent) - bridge.answered() >= IN_FLIGHT:
                time.sleep(CALL_GAP_S)
                continue
            n += 1
            key = f"k{n}"
            request_id = bridge.call("add_memory", session="s", agent="a", content=f"fact number {n}",
                                     idempotency_key=key)  # fmt: skip
            sent[request_id] = {"tool": "add_memory", "key": key}
            request_id = bridge.call("recall", query="fact", limit=3)
            sent[request_id] = {"tool": "recall"}
            time.sleep(CALL_GAP_S)

    try:
        bridge.handshake()
        sender = threading.Thread(target=send_calls, daemon=True)
        sender.start()
        previous: int | None = None
        killed: list[int] = []
        for _ in range(KILLS):
            server = _live_server(data_dir, previous)
            floor = bridge.answered()
            deadline = time.monotonic() + 60
            while bridge.answered() < floor + ANSWERS_BETWEEN_KILLS and time.monotonic() < deadline:
                time.sleep(0.02)  # calls in flight on this server
            _kill(server)
            previous = server.pid
            killed.append(server.pid)
        _live_server(data_dir, previous)
        time.sleep(0.5)
        stop_sending.set()
        sender.join(30)
        assert bridge.close() == 0
    finally:
        bridge.kill()

    answers = bridge.answers
    assert set(answers) - {1} <= set(sent), "answers to requests that were never sent"  # 1: initialize
    unanswered = [rid for rid in sent if not answers.get(rid)]
    twice = [rid for rid in sent if len(answers.get(rid, [])) > 1]
    assert (unanswered, twice) == ([], []), f"{len(unanswered)} of {len(sent)} calls unanswered, {len(twice)} twice"
    outcomes = {"ok": 0, "maybe": 0, "not applied": 0}
    for request_id, call in sent.items():
        error = tool_error(answers[request_id][0])
        if error is None:
            outcomes["ok"] += 1
            continue
        assert error["code"] == "SERVER_UNAVAILABLE", error
        assert isinstance(error["may_have_been_applied"], bool), error
        if error["may_have_been_applied"]:
            assert call["tool"] == "add_memory", "a read is resent, never left in doubt"
            outcomes["maybe"] += 1
        else:
            outcomes["not applied"] += 1
    print(f"{KILLS} kills, {len(sent)} calls: {outcomes}")  # shown with -s
    assert outcomes["ok"] >= KILLS * ANSWERS_BETWEEN_KILLS, outcomes
    _assert_one_line_per_loss(bridge.stderr, killed)  # and after each, the calls went on: they recovered

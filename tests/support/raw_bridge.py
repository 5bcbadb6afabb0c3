"""The stdio bridge (``memory-core serve --data-dir DIR``) as a raw subprocess: lines in, lines out.

The SDK's client would hide what these tests count (an answer missing, or given twice), so
``RawBridge`` writes JSON-RPC lines to the bridge's stdin itself, files every line it reads
from stdout under its ``id``, and keeps the bridge's stderr (what an MCP client shows the user).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import IO, Any

from testbed.mcp_harness import ROOT, server_env
from testbed.processes import stop

CLIENT = {"name": "raw-bridge-test", "version": "1"}
LEGACY = "2025-06-18"


class RawBridge:
    """One stdio client's bridge process; ``answers[id]`` lists every line that answered ``id``."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        args = [sys.executable, "-c", "from tools.cli.app import main; main()", "serve", "--data-dir", str(data_dir)]
        self.proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._changed = threading.Condition()
        self.answers: defaultdict[Any, list[dict[str, Any]]] = defaultdict(list)
        self.other: list[dict[str, Any]] = []  # notifications and server requests
        self._stderr: list[str] = []
        self._next_id = 1
        self._readers = [threading.Thread(target=self._pump_stdout, args=(self.proc.stdout,), daemon=True),
                         threading.Thread(target=self._pump_stderr, args=(self.proc.stderr,), daemon=True)]
        for reader in self._readers:
            reader.start()

    # ---- reading ---------------------------------------------------------------------------
    def _pump_stdout(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            message = json.loads(line)
            with self._changed:
                if "result" in message or "error" in message:
                    self.answers[message.get("id")].append(message)
                else:
                    self.other.append(message)
                self._changed.notify_all()

    def _pump_stderr(self, stderr: IO[bytes]) -> None:
        for line in stderr:
            with self._changed:
                self._stderr.append(line.decode("utf-8", "replace"))
                self._changed.notify_all()

    @property
    def stderr(self) -> str:
        with self._changed:
            return "".join(self._stderr)

    def wait_for(self, request_id: Any, timeout_s: float = 60.0) -> dict[str, Any]:
        """The first answer to ``request_id``; fails the test after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self.answers.get(request_id):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no answer to request {request_id} within {timeout_s:g} s")
                self._changed.wait(left)
            return self.answers[request_id][0]

    def wait_stderr(self, needle: str, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while needle not in "".join(self._stderr):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{needle!r} never appeared on stderr: {''.join(self._stderr)!r}")
                self._changed.wait(left)
            return "".join(self._stderr)

    def answered(self) -> int:
        with self._changed:
            return sum(1 for key in self.answers if key is not None)

    # ---- writing ---------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")
        self._stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        return request_id

    def call(self, tool: str, **arguments: Any) -> int:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def handshake(self, timeout_s: float = 60.0) -> None:
        """The legacy initialize handshake, as today's desktop clients do it."""
        init = self.request("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT})
        assert "result" in self.wait_for(init, timeout_s), self.answers[init]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self, timeout_s: float = 90.0) -> int:
        """Close stdin (the client leaves) and wait for the bridge to exit; its exit status."""
        self._stdin.close()
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop(self.proc)
            raise AssertionError(f"the bridge did not exit within {timeout_s:g} s of its stdin closing") from None
        for reader in self._readers:
            reader.join(5)
        return code

    def kill(self) -> None:
        stop(self.proc)


def tool_result(answer: dict[str, Any]) -> dict[str, Any]:
    """The ``result`` of a tools/call answer (a tool error is a result too)."""
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def tool_error(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The structured error of a tool-error answer; None for a successful call."""
    result = tool_result(answer)
    if not result.get("isError"):
        return None
    text = result["content"][0]["text"]
    assert "\n" not in text and "Traceback" not in text, text
    error: dict[str, Any] = result["structuredContent"]["error"]
    assert text.startswith(f"{error['code']}: "), text
    return error

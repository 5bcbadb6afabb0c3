"""What a harness waits for: ``memory-core hook`` per event, warm (the shared server runs) and cold (none does).

    python -m bench.latency.hooks [--warm 20] [--cold 3] [--turns 200] [--json PATH]

Each sample is one process as Claude Code starts it: ``memory-core hook`` with the event's JSON on
stdin, timed from spawn to exit. The store holds a session of ``--turns`` captured turns (default
embedding model, so a cold start loads it). Each round appends a prompt and a reply to the transcript,
then runs the events in the order a compaction brings them: Stop (captures the two new turns),
PreCompact (writes the handoff), SessionStart ``compact`` (injects; nothing new to capture), and a
UserPromptSubmit (prompt injection off: nothing to do).

- **warm**: the data directory's shared server is running (as it is while Claude Code runs the
  plugin's MCP server, or within ``server.shared_idle_s`` of the last event);
- **cold**: no server; the hook starts one and waits for it (the settings cache is warm, as on any
  event but a machine's very first);
- **nothing to do**: a prompt without prompt injection, a start without a data directory — no store.

Side by side, for the machine's noise: ``python -c pass`` and ``memory-core --help`` in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import percentiles, print_table
from tools.server_record import read_announcement

EVENTS = ("Stop", "PreCompact", "SessionStart", "UserPromptSubmit")  # the order they come in around a compaction


class Harness:
    """A data directory, a transcript and the environment a harness runs the hook in."""

    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.transcript = root / "transcript.jsonl"
        self.session = "bench-session"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
        self.env.update({"MEMORY_CORE_TENANT": "bench", "XDG_CACHE_HOME": str(root / "cache"),
                         "MEMORY_CORE_SERVER_SHARED_IDLE_S": "600"})
        self.lines = 0

    def say(self, role: str, text: str) -> None:
        self.lines += 1
        line = {"type": role, "uuid": f"line-{self.lines}", "timestamp": f"2026-12-06T10:{self.lines // 60 % 60:02d}:"
                f"{self.lines % 60:02d}.000Z", "sessionId": self.session,
                "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]}}
        with self.transcript.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def payload(self, event: str) -> bytes:
        data: dict[str, Any] = {"hook_event_name": event, "session_id": self.session, "cwd": "/work/app",
                                "transcript_path": str(self.transcript)}
        data.update({"SessionStart": {"source": "compact"}, "PreCompact": {"trigger": "auto"},
                     "UserPromptSubmit": {"prompt": "what next?"}}.get(event, {}))
        return json.dumps(data).encode()

    def settle(self) -> None:
        """Capture what the transcript holds (a first capture of many turns may take several events)."""
        for _ in range(10):
            if self.hook("Stop")[1] is None:
                return
        raise RuntimeError("the first capture did not finish in 10 events")

    def hook(self, event: str, *, data_dir: Path | None = None) -> tuple[float, str | None]:
        """One run of the hook, as the harness times it (spawn to exit), and its stderr line if it had one
        (a store too slow for ``hooks.timeout_s`` on a loaded machine: the hook gave up, as it must)."""
        command = [sys.executable, "-P", "-m", "memory_core", "hook", "--data-dir", str(data_dir or self.data)]
        started = time.perf_counter()
        done = subprocess.run(command, input=self.payload(event), capture_output=True, env=self.env, timeout=300)
        return time.perf_counter() - started, done.stderr.decode().strip() or None

    def stop_server(self) -> None:
        found = read_announcement(self.data)
        if found is None:
            return
        os.kill(found.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while read_announcement(self.data) is not None and time.monotonic() < deadline:
            time.sleep(0.05)


def reference(command: Sequence[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(list(command), capture_output=True, env=env, timeout=120, check=True)
    return time.perf_counter() - started


def run(warm: int, cold: int, turns: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    failed: dict[str, int] = {}

    def note(name: str, sample: tuple[float, str | None]) -> None:
        samples.setdefault(name, []).append(sample[0])
        if sample[1] is not None:
            failed[name] = failed.get(name, 0) + 1
            print(f"  {name}: {sample[1]}", flush=True)

    with tempfile.TemporaryDirectory(prefix="hook-latency-") as tmp:
        h = Harness(Path(tmp))
        for i in range(turns // 2):
            h.say("user", f"Prompt {i}: change the cursor pagination of the list endpoint, step {i}.")
            h.say("assistant", f"Step {i} done: the handler pages by opaque cursor; tests pass.")
        h.settle()  # first capture (starts the server, caches the settings)
        h.hook("PreCompact")
        nothing = Path(tmp) / "absent"
        for _ in range(warm):
            h.say("user", "One more change to the cursor format, please.")
            h.say("assistant", "Changed; the format is documented in docs/api.md.")
            for event in EVENTS:
                note(f"warm {event}", h.hook(event))
            note("nothing: start without a data dir", h.hook("SessionStart", data_dir=nothing))
            samples.setdefault("python -c pass", []).append(reference([sys.executable, "-c", "pass"], h.env))
            samples.setdefault("memory-core --help", []).append(
                reference([sys.executable, "-P", "-m", "memory_core", "--help"], h.env))
        for _ in range(cold):
            for event in ("SessionStart", "Stop"):
                h.stop_server()
                h.say("user", "A prompt after a pause.")
                note(f"cold {event}", h.hook(event))
        h.stop_server()
    return {name: {**percentiles(values), "gave_up": failed.get(name, 0)} for name, values in samples.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = run(args.warm, args.cold, args.turns)
    load = os.getloadavg()[0]
    print_table(f"memory-core hook, spawn to exit (2 cores, load {load:.1f})",
                ["run", "p50 ms", "p95 ms", "n", "gave up"],
                [[name, f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}", r["n"], r["gave_up"]]
                 for name, r in results.items()])
    if args.json:
        args.json.write_text(json.dumps({"load": load, "results": results}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

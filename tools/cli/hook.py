"""``memory-core hook``: the one command a harness runs on its lifecycle events.

The harness writes its event's JSON payload on stdin (Claude Code's hooks: SessionStart,
PreCompact, PostCompact, Stop, SubagentStop, SessionEnd, UserPromptSubmit); the command captures,
writes the handoff or injects (:mod:`memory_core.harness.runner`) and prints what the harness reads
on stdout (``hookSpecificOutput.additionalContext``), or nothing. It **always exits 0**: a malformed
payload, a missing transcript, a missing tenant, a locked or absent data directory, a server that
is down, a bug — each is one line on stderr (``memory-core hook: CODE: sentence``), and stdout gets
nothing or one whole JSON object, written last. A watchdog ends the process after
``hooks.timeout_s`` (plus a second) whatever it was doing.

It binds as the MCP server does: ``MEMORY_CORE_TENANT`` / ``MEMORY_CORE_AGENT`` /
``MEMORY_CORE_SCOPE`` (or ``[server]``, or ``--tenant`` / ``--agent``), the data directory of
``--data-dir`` or ``storage.data_dir``; without a bound agent it writes as ``hooks.agent``. The
harness's ``cwd`` becomes the memory's project.

Speed: the launcher (:mod:`memory_core.launcher`) hands ``memory-core hook`` here before Typer
loads, and the few settings the hook needs are cached per set of inputs (package version, config
file, ``MEMORY_CORE_*`` variables, working directory, flags) under ``~/.cache/memory-core``, so a
warm event loads no pydantic; the settings themselves are still only ever read by ``load_settings``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from memory_core import MemoryCoreError, TenantRequiredError
from memory_core.harness import (
    MAX_PAYLOAD_BYTES,
    SESSION_START,
    USER_PROMPT,
    Binding,
    HookEvent,
    HookOptions,
    HookRunner,
    HookStore,
    Limits,
    Outcome,
    StateStore,
    parse_payload,
)

if TYPE_CHECKING:
    from memory_core import Settings
    from memory_core.harness import ModelClient

PREFIX = "memory-core hook: "
CACHE_VERSION = 1
DEFAULT_TIMEOUT_S = 20.0
WRITING_SCOPES = frozenset({"write", "admin"})


@dataclass(frozen=True)
class HookConfig:
    """What the hook needs of the settings (cached between events)."""

    data_dir: str  # absolute
    config: str | None  # the config file, for the shared server this hook may start
    tenant: str | None
    agent: str
    scope: str
    hooks: dict[str, Any] = field(default_factory=dict)  # the [hooks] section
    provider: bool = False  # a model provider is enabled (the handoff is polished by it)

    def options(self, prompt_injection: bool) -> HookOptions:
        h = self.hooks
        return HookOptions(
            budget_tokens=h["budget_tokens"], turns=h["turns"], relevant=h["relevant"],
            min_confidence=h["min_confidence"], inject_on_startup=h["inject_on_startup"],
            prompt_injection=h["prompt_injection"] or prompt_injection,
            prompt_budget_tokens=h["prompt_budget_tokens"], prompt_min_confidence=h["prompt_min_confidence"],
            max_read_bytes=h["max_read_mb"] << 20, limits=Limits(turn_chars=h["turn_chars"]), summaries=self.provider)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # a harness's command line is wrong: say so, still exit 0
        _say(f"INVALID_INPUT: {message}")
        raise SystemExit(0)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memory-core hook", description=(
        "Run by a harness on each lifecycle event (Claude Code hooks): reads the event's JSON on stdin, captures "
        "the transcript, writes a handoff before a compaction, injects recalled memory at session start. Always "
        "exits 0. See docs/harness.md."))
    p.add_argument("--data-dir", type=Path, help="data directory (default: storage.data_dir)")
    p.add_argument("--config", "-c", type=Path, help="TOML config file (default: $MEMORY_CORE_CONFIG)")
    p.add_argument("--tenant", help="tenant (default: MEMORY_CORE_TENANT or server.tenant)")
    p.add_argument("--agent", help="agent (default: MEMORY_CORE_AGENT or server.agent, else hooks.agent)")
    p.add_argument("--store", choices=("auto", "shared", "direct"), help="where to act (default: hooks.store)")
    p.add_argument("--prompt-injection", action="store_true",
                   help="inject relevant memories on UserPromptSubmit (also hooks.prompt_injection)")
    return p


def main(argv: Sequence[str] | None = None, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None) -> None:
    """Console entry: run one event and exit 0, whatever happened."""
    started = time.monotonic()
    watchdog = Watchdog()
    watchdog.arm(DEFAULT_TIMEOUT_S + 1.0)
    try:
        output = run(list(sys.argv[1:] if argv is None else argv), stdin or sys.stdin.buffer, started, watchdog)
        if output is not None:
            out = stdout or sys.stdout
            out.write(json.dumps(output, ensure_ascii=False) + "\n")
            out.flush()
    except SystemExit:
        pass
    except MemoryCoreError as exc:
        _say(f"{exc.code}: {exc.message}")
    except Exception as exc:  # the top of the command: a harness must never see a traceback or a failure
        _say(f"INTERNAL: {type(exc).__name__}: {exc}")
    finally:
        watchdog.cancel()
    raise SystemExit(0)


def run(argv: list[str], stdin: IO[bytes], started: float, watchdog: Watchdog | None = None
        ) -> dict[str, Any] | None:
    """One event: the JSON to print (None: nothing); coded errors for the one stderr line."""
    args = parser().parse_args(argv)
    event = parse_payload(stdin.read(MAX_PAYLOAD_BYTES + 1))
    cfg, settings = resolve_config(args, os.environ)
    deadline = started + float(cfg.hooks["timeout_s"])
    if watchdog is not None:
        watchdog.arm(deadline - time.monotonic() + 1.0)
    options = cfg.options(args.prompt_injection)
    if not _worth_a_store(event, options, Path(cfg.data_dir)):
        return None
    if cfg.tenant is None:
        raise TenantRequiredError("No tenant is bound: set MEMORY_CORE_TENANT (or server.tenant, or --tenant).")
    binding = Binding(cfg.tenant, cfg.agent, can_write=cfg.scope in WRITING_SCOPES)
    mode = args.store or cfg.hooks["store"]
    if mode == "direct" and settings is None:
        settings = _load_settings(args)
    from tools.cli.hook_store import open_hook_store  # the shared server's client: stdlib only

    store = open_hook_store(settings, Path(cfg.data_dir), Path(cfg.config) if cfg.config else None, binding,
                            cfg.scope, mode=mode, deadline=deadline)
    try:
        outcome = act(event, store, cfg, options, binding, args, deadline)
    finally:
        store.close()
    if outcome.problem:
        _say(outcome.problem)
    return outcome.output


def act(event: HookEvent, store: HookStore, cfg: HookConfig, options: HookOptions, binding: Binding,
        args: argparse.Namespace, deadline: float) -> Outcome:
    """Run the event through the harness runner (the model client is built only if a handoff needs it)."""
    model = (lambda: _model_client(args, deadline)) if cfg.provider else None
    runner = HookRunner(store, StateStore(Path(cfg.data_dir)), binding, options, model=model, deadline=deadline)
    return runner.run(event)


def _worth_a_store(event: HookEvent, options: HookOptions, data_dir: Path) -> bool:
    """Whether the event may do anything at all (no store is opened, and no server started, for nothing)."""
    if event.name == USER_PROMPT:
        return options.prompt_injection
    # no data directory at a start: no memory to inject, and no transcript before the first prompt
    return not (event.name == SESSION_START and not data_dir.is_dir())


# ---- settings, cached ----------------------------------------------------------------------------
def resolve_config(args: argparse.Namespace, environ: os._Environ[str] | dict[str, str]
                   ) -> tuple[HookConfig, Settings | None]:
    """The hook's settings: from the cache when its inputs are unchanged, else loaded (and cached).
    The second value is the full settings when they had to be loaded."""
    key = _cache_key(args, environ)
    cached = _read_cache(key)
    if cached is not None:
        return cached, None
    settings = _load_settings(args)
    server = settings.server
    data_dir = Path(args.data_dir if args.data_dir is not None else settings.storage.data_dir).expanduser()
    config_file = args.config or environ.get("MEMORY_CORE_CONFIG")
    cfg = HookConfig(
        data_dir=str(data_dir.resolve()), config=str(Path(config_file).resolve()) if config_file else None,
        tenant=server.tenant, agent=server.agent or settings.hooks.agent, scope=server.scope.value,
        hooks=settings.hooks.model_dump(mode="json"), provider=settings.model_provider.enabled)
    _write_cache(key, cfg)
    return cfg, settings


def _load_settings(args: argparse.Namespace) -> Settings:
    from memory_core import load_settings

    server = {k: v for k, v in (("tenant", args.tenant), ("agent", args.agent)) if v is not None}
    return load_settings(args.config, overrides={"server": server} if server else None)


def _cache_dir() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or (str(Path.home() / ".cache") if Path.home().is_dir() else "")
    return Path(base) / "memory-core" / "hook-config" if base else None


def _cache_key(args: argparse.Namespace, environ: os._Environ[str] | dict[str, str]) -> str:
    """Every input the hook's settings depend on: a change to any of them is a new key."""
    import memory_core

    schema = Path(memory_core.__file__).with_name("settings") / "schema.py"  # the settings' shape
    config_file = args.config or environ.get("MEMORY_CORE_CONFIG")
    inputs = {
        "v": CACHE_VERSION, "package": memory_core.__version__, "schema": _stat(schema),
        "config": [str(config_file), _stat(Path(config_file))] if config_file else None,
        "env": sorted((k, v) for k, v in environ.items() if k.startswith("MEMORY_CORE_")),
        "cwd": os.getcwd(), "args": [str(args.data_dir), args.tenant, args.agent],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:40]


def _stat(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def _read_cache(key: str) -> HookConfig | None:
    folder = _cache_dir()
    if folder is None:
        return None
    try:
        data = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        return HookConfig(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_cache(key: str, cfg: HookConfig) -> None:
    folder = _cache_dir()
    if folder is None:
        return
    with contextlib.suppress(OSError):  # no cache: the next event loads the settings again
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(cfg), f)
        os.replace(tmp, folder / f"{key}.json")


def _model_client(args: argparse.Namespace, deadline: float) -> ModelClient | None:
    """The provider's client, its timeouts cut to the hook's time left (None: the settings say no provider)."""
    from memory_core.harness import hook_model_client

    return hook_model_client(_load_settings(args).model_provider, max(0.5, deadline - time.monotonic() - 1.0))


# ---- never blocking, never loud --------------------------------------------------------------------
def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(PREFIX + " ".join(text.split()) + "\n")
        sys.stderr.flush()


class Watchdog:
    """Ends the process (exit 0, one line on stderr) if the event still runs when it fires."""

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None

    def arm(self, seconds: float) -> None:
        """Fire ``seconds`` from now (instead of whenever it was set to fire)."""
        self.cancel()

        def expire() -> None:
            _say(f"TIMEOUT: the hook gave up after {seconds:.0f} s (hooks.timeout_s); the harness goes on.")
            os._exit(0)

        self._timer = threading.Timer(max(0.1, seconds), expire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

"""Claude Code's ``settings.json``: our hook entries merged in, or taken out, keeping everything else.

A settings file's ``hooks`` maps an event to a list of matcher groups, each with its own list of
commands. :func:`merge` takes out every command of ours (a ``memory-core … hook`` command, however
it was installed), drops the groups that leaves empty, then adds one group per event: installing
twice gives the same file, and no other hook, setting or key is touched. :func:`remove` does the
first half only. :func:`write_settings` replaces the file atomically, so a harness never reads half.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_core.errors import ConfigError

HOOK_TIMEOUT_S = 30  # what the harness waits; the hook gives up on its own before (hooks.timeout_s)
OURS = re.compile(r"(^|[\s/'\"])(memory-core|python3?(\.\d+)?\s+(-\S+\s+)*-m\s+memory_core)(\S*\s+)+?hook(\s|$)")


@dataclass(frozen=True)
class HookEntry:
    """One event's group: the event, its matcher (None: every occurrence) and the command."""

    event: str
    command: str
    matcher: str | None = None

    def group(self) -> dict[str, Any]:
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": self.command, "timeout": HOOK_TIMEOUT_S}]}
        if self.matcher is not None:
            group = {"matcher": self.matcher, **group}
        return group


def entries(command: str, *, prompt_injection: bool = False) -> list[HookEntry]:
    """The events memory-core hooks into: a start that is not a /clear, before a compaction, after each
    reply, the session's end, and each prompt when prompt injection is asked for."""
    found = [HookEntry("SessionStart", command, "startup|resume|compact"), HookEntry("PreCompact", command),
             HookEntry("Stop", command), HookEntry("SessionEnd", command)]
    if prompt_injection:
        found.append(HookEntry("UserPromptSubmit", f"{command} --prompt-injection"))
    return found


def is_ours(command: object) -> bool:
    """Whether a hook command is a memory-core hook command."""
    return isinstance(command, str) and OURS.search(command) is not None


def remove(settings: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``settings`` without our hook commands (and without groups or events left empty); how many went."""
    out = dict(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out, 0
    removed = 0
    kept_events: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept_events[event] = groups
            continue
        kept_groups = []
        for group in groups:
            commands = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(commands, list):
                kept_groups.append(group)
                continue
            left = [c for c in commands if not (isinstance(c, dict) and is_ours(c.get("command")))]
            removed += len(commands) - len(left)
            if left:
                kept_groups.append({**group, "hooks": left})
            elif not commands:
                kept_groups.append(group)
        if kept_groups:
            kept_events[event] = kept_groups
    if kept_events:
        out["hooks"] = kept_events
    else:
        out.pop("hooks")
    return out, removed


def merge(settings: Mapping[str, Any], wanted: list[HookEntry]) -> dict[str, Any]:
    """``settings`` with exactly ``wanted`` as our hook commands (see the module docstring)."""
    out, _ = remove(settings)
    hooks = dict(out.get("hooks") or {})
    for entry in wanted:
        hooks[entry.event] = [*hooks.get(entry.event, []), entry.group()]
    out["hooks"] = hooks
    return out


def read_settings(path: Path) -> dict[str, Any]:
    """A settings file's object (``{}`` when there is none); CONFIG_INVALID naming it when it is not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror or exc}.", key=str(path)) from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); it was left as it is.", key=str(path)) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object; it was left as it is.", key=str(path))
    return data


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Replace the file atomically (two-space JSON, as Claude Code writes it), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o644
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)

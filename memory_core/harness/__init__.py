"""The harness integration: what ``memory-core hook`` does on a coding agent's lifecycle events.

A harness (Claude Code first) runs one command on its events and hands it a JSON payload. This
package is that command's domain, free of any transport:

- :mod:`~memory_core.harness.payload`: the payload read into a :class:`HookEvent`;
- :mod:`~memory_core.harness.transcript`: the harness's JSONL transcript, read incrementally;
- :mod:`~memory_core.harness.tool_calls`: a tool call told in one short line (never a file's contents);
- :mod:`~memory_core.harness.capture`: transcript entries turned into ``turn`` rows with stable keys;
- :mod:`~memory_core.harness.state`: how far each session's transcript was read, and what was injected;
- :mod:`~memory_core.harness.handoff`: the handoff built without a model (and polished by one, fail-soft);
- :mod:`~memory_core.harness.block`: the one recalled-memory block injected at session start;
- :mod:`~memory_core.harness.tokens`: a token count that never falls short of cl100k's;
- :mod:`~memory_core.harness.store`: the ``HookStore`` seam (an open ``MemoryCore``, or the shared server);
- :mod:`~memory_core.harness.runner`: one event, start to end;
- :mod:`~memory_core.harness.install`: our entries merged into (or taken out of) Claude Code's ``settings.json``;
- :mod:`~memory_core.harness.model`: the provider's client held to the hook's time, when a model writes the handoff.

The boundary (``tools/cli/hook.py``, ``hook_store.py``, ``hooks.py``) imports the package's names only,
pinned by ``tests/test_public_api.py``; each loads on first use (PEP 562), so the warm hook pays for
the modules it runs and no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_core.harness.capture import CapturedRow, Limits
    from memory_core.harness.install import entries as hook_entries
    from memory_core.harness.install import merge as merge_hooks
    from memory_core.harness.install import read_settings as read_harness_settings
    from memory_core.harness.install import remove as remove_hooks
    from memory_core.harness.install import write_settings as write_harness_settings
    from memory_core.harness.model import hook_model_client
    from memory_core.harness.payload import MAX_PAYLOAD_BYTES, SESSION_START, USER_PROMPT, HookEvent, parse_payload
    from memory_core.harness.runner import HookOptions, HookRunner, Outcome
    from memory_core.harness.state import StateStore
    from memory_core.harness.store import Ack, Added, Binding, DirectStore, HookStore, Recovered, StoredRow
    from memory_core.provider.client import ModelClient

# name -> (its module, the name it has there)
_LAZY: dict[str, tuple[str, str]] = {
    **{n: ("memory_core.harness.capture", n) for n in ("CapturedRow", "Limits")},
    "hook_entries": ("memory_core.harness.install", "entries"),
    "merge_hooks": ("memory_core.harness.install", "merge"),
    "read_harness_settings": ("memory_core.harness.install", "read_settings"),
    "remove_hooks": ("memory_core.harness.install", "remove"),
    "write_harness_settings": ("memory_core.harness.install", "write_settings"),
    "hook_model_client": ("memory_core.harness.model", "hook_model_client"),
    **{n: ("memory_core.harness.payload", n)
       for n in ("MAX_PAYLOAD_BYTES", "SESSION_START", "USER_PROMPT", "HookEvent", "parse_payload")},
    **{n: ("memory_core.harness.runner", n) for n in ("HookOptions", "HookRunner", "Outcome")},
    "StateStore": ("memory_core.harness.state", "StateStore"),
    **{n: ("memory_core.harness.store", n)
       for n in ("Ack", "Added", "Binding", "DirectStore", "HookStore", "Recovered", "StoredRow")},
    "ModelClient": ("memory_core.provider.client", "ModelClient"),  # what hook_model_client returns
}

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "SESSION_START",
    "USER_PROMPT",
    "Ack",
    "Added",
    "Binding",
    "CapturedRow",
    "DirectStore",
    "HookEvent",
    "HookOptions",
    "HookRunner",
    "HookStore",
    "Limits",
    "ModelClient",
    "Outcome",
    "Recovered",
    "StateStore",
    "StoredRow",
    "hook_entries",
    "hook_model_client",
    "merge_hooks",
    "parse_payload",
    "read_harness_settings",
    "remove_hooks",
    "write_harness_settings",
]  # = the keys of _LAZY (tests/test_public_api.py)


def __getattr__(name: str) -> Any:
    from memory_core.heavy_imports import lazy_name

    return lazy_name(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

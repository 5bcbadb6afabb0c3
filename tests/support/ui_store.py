"""A small store for the inspector's tests: two tenants, a long session, a handoff chain,
a private memory and memories whose text is HTML."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory_core import MemoryCore
from tools.auth import hash_token

OPERATOR_TOKEN = "operator-secret-token"
AGENT_TOKEN = "agent-acme-token"
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"> & <b>bold</b>'
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
TURNS = 60


@dataclass(frozen=True)
class Refs:
    hostile: str
    first_handoff: str
    second_handoff: str
    private: str
    other_tenant: str
    turns: list[str]  # s1's turns, oldest first


def ui_settings() -> dict[str, object]:
    """Overrides for load_settings: the operator token and one tenant-bound agent token."""
    return {"server": {"operator_token_sha256": hash_token(OPERATOR_TOKEN),
                       "tokens": {hash_token(AGENT_TOKEN): "acme"}}}


def config_text() -> str:
    return (f'[server]\noperator_token_sha256 = "{hash_token(OPERATOR_TOKEN)}"\n\n'
            f'[server.tokens]\n"{hash_token(AGENT_TOKEN)}" = "acme"\n')


def populate(core: MemoryCore) -> Refs:
    turns = core.add_memories([
        {"tenant": "acme", "session": "s1", "agent": "planner" if i % 2 else "coder", "type": "turn",
         "role": "assistant", "content": f"Turn {i}: we discussed the deploy pipeline step {i}.",
         "timestamp": (START + timedelta(minutes=i)).isoformat()}
        for i in range(TURNS)
    ])
    hostile = core.add_memory("acme", "s1", "coder", HOSTILE, type="note",
                              timestamp=(START + timedelta(minutes=TURNS)).isoformat()).ref
    first = core.create_handoff("acme", "s1", "planner", "Handoff one: rotate the staging key next.",
                                timestamp=(START + timedelta(minutes=TURNS + 1)).isoformat()).ref
    second = core.create_handoff("acme", "s1", "planner", "Handoff two: the staging key is rotated; deploy next.",
                                 timestamp=(START + timedelta(minutes=TURNS + 2)).isoformat()).ref
    private = core.add_memory("acme", "s2", "coder", "A private scratch thought about billing.", type="note",
                              visibility="agent", timestamp=(START + timedelta(days=1)).isoformat()).ref
    other = core.add_memory("globex", "g1", "bot", "Globex secret roadmap.", type="note",
                            timestamp=(START + timedelta(days=2)).isoformat()).ref
    return Refs(hostile, first, second, private, other, [t.ref for t in turns])

"""Hypothesis strategies for hostile MCP tool arguments.

Each tool gets a dictionary of arguments where every parameter is usually well formed and
otherwise hostile: the wrong JSON type, a huge string, unicode edge cases, NUL bytes,
deeply nested objects, injection-looking text (Chroma where-operators, FTS5 syntax, SQL
LIKE wildcards and quotes), malformed refs and cursors, and the refs and cursors of
another tenant. Required parameters are sometimes left out, unknown ones sometimes added.

Only values that survive JSON are generated (no lone surrogates, no NaN or infinities):
the tools are reached through the SDK's in-process client, which skips serialization, and
a real transport could not carry anything else.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

VOCAB = ("orion", "vault", "deploy", "billing", "invoice", "queue", "retry", "handoff", "schema", "canary",
         "rollback", "pager", "incident", "budget", "the", "and", "of")
EDGE_CHARS = (
    "\x00", "\u202e", "\u200b", "\u200d", "\ufeff", "\ufffe", "\uffff", "\U0010ffff", "\u2028", "\u2029",
    "\u0301", "😀", "👩‍👩‍👧", "İ", "ß", "ﬀ", "\t", "\n", "\r\n", "\x7f", "\x1b[2J", "\u00a0", "\u3000", "𝕏",
    "ﷺ", "\u0600", "\U000e0001", "a\u0308", "Ⅻ", "١٢", "\x0b", "\x85",
)
INJECTIONS = (
    # Chroma / Mongo-style where operators, as text
    '{"$ne": null}', "$ne", "$or", "$and", "$in", "$nin", "$contains", "$not_contains", "$where", "$regex",
    # FTS5 query syntax
    "NEAR(orion vault)", "NEAR(orion vault, 2", "NEAR(", "*", "orion*", "content:orion", "tenant:beta",
    "session:s-main", '"unbalanced', "'unbalanced", "orion OR vault", "NOT orion", "orion AND", "AND", "OR",
    "^orion", "(", ")", '""', "-orion", "+orion", "{content tenant}: orion", "orion:", ":", "\"orion\" *",
    # SQL quotes, comments and LIKE wildcards
    "%", "_", "%%", "\\", "\\%", "discord:%", "discord:_", "discord:1_", "slack:%", "' OR '1'='1",
    "'; DROP TABLE memories; --", "1; SELECT * FROM memories", "*/", "/*", "--", "\\'", "`", "[", "]",
    # paths and tenant-looking text
    "../beta", "beta", "BETA", "acme/../beta", "mem:1", "ep:1", "@auto", "null", "None", "undefined",
)
HOSTILE_TENANTS = (
    "", " ", "BETA", "Beta", "beta ", " beta", "beta\x00", "beta%", "bet_", "b*", "acme/beta", "acme\nbeta",
    "$ne", "*", "%", "acme'--", "-acme", ".acme", "é", "a" * 129, "gamma", "acme.", "ACME", "acme\u200b",
)
MALFORMED_REFS = (
    "", "mem", "mem:", ":", "mem:0", "mem:-1", "mem:01", "mem:1e3", "mem:1.0", "mem: 1", " mem:1", "mem:1 ",
    "MEM:1", "mem:١", "mem:１", "mem:99999999999999999999", "mem:999999999999999999", "ep:0", "episode:1",
    "mem:1;DROP", "mem:*", "mem:%", "mem:1\x00", "mem:1\n", "mem:0x1", "mem:+1", "ref:1", "mem:1:2", "ep:",
    "mem:1,mem:2", "mem:%_", "ep:-0",
)
HUGE_SIZES = (5_000, 100_000, 100_001, 200_000)
FOREIGN_TENANT = "beta"


@dataclass
class World:
    """Handles that exist in the store: the caller's own, and another tenant's."""

    own_refs: list[str] = field(default_factory=list)
    own_episodes: list[str] = field(default_factory=list)
    own_cursors: list[str] = field(default_factory=list)
    foreign_refs: list[str] = field(default_factory=list)
    foreign_episodes: list[str] = field(default_factory=list)
    foreign_cursors: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=lambda: ["s-main", "s-notes"])
    agents: list[str] = field(default_factory=lambda: ["alice", "bob"])
    source_ids: list[str] = field(default_factory=lambda: ["discord:123", "discord:1_2", "slack:%x"])


def _pick(values: list[str]) -> SearchStrategy[str]:
    return st.sampled_from(values) if values else st.nothing()


def _nest(depth: int, shape: str, leaf: object) -> object:
    value = leaf
    for level in range(depth):
        value = [value] if shape == "list" or (shape == "mixed" and level % 2) else {"k": value}
    return value


edge_text = st.lists(st.sampled_from(EDGE_CHARS + INJECTIONS + VOCAB), min_size=1, max_size=6).map("".join)
weird_text: SearchStrategy[str] = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
    edge_text,
    st.sampled_from(INJECTIONS),
)
huge_text = st.builds(
    lambda unit, size: (unit * size)[:size],
    st.sampled_from(["a", "é", "😀", " ", "\x00", "orion ", "mem:1,", "\u202e"]),
    st.sampled_from(HUGE_SIZES),
)
words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=8).map(" ".join)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False), weird_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(weird_text, st.sampled_from(["id", "$ne", "$or", "tenant"])), inner, max_size=4),
    ),
    max_leaves=12,
)
deep = st.builds(_nest, st.integers(1, 120), st.sampled_from(["dict", "list", "mixed"]), scalars)
junk = st.one_of(json_values, deep)
wrong_type = st.one_of(st.none(), st.booleans(), st.integers(), st.lists(scalars, max_size=3),
                       st.dictionaries(st.sampled_from(["$ne", "$or", "$in", "id"]), scalars, max_size=2))


@dataclass(frozen=True)
class Param:
    """One tool parameter: well-formed values, hostile values of the right JSON type (they get
    past the schema and reach the service), and values of the wrong type (the schema's job)."""

    valid: SearchStrategy[Any]
    hostile: SearchStrategy[Any]
    wrong: SearchStrategy[Any] = wrong_type

    def wild(self) -> SearchStrategy[Any]:
        return st.one_of(self.valid, self.hostile, self.wrong, junk)


hostile_text = st.one_of(weird_text, weird_text, weird_text, huge_text)


def text_param(valid: SearchStrategy[str]) -> Param:
    return Param(valid, hostile_text)


def pool(values: list[str]) -> Param:
    return text_param(_pick(values))


def tenants() -> Param:
    return Param(st.just("acme"), st.one_of(st.sampled_from(HOSTILE_TENANTS), huge_text))


def refs(world: World) -> SearchStrategy[Any]:
    """A ref: the caller's own, another tenant's, malformed, or text of any sort."""
    return st.one_of(
        _pick(world.own_refs + world.own_episodes),
        _pick(world.own_refs + world.own_episodes),
        _pick(world.foreign_refs + world.foreign_episodes),
        st.sampled_from(MALFORMED_REFS),
        st.integers(-5, 10**6).map(lambda i: f"mem:{i}"),
        st.integers(0, 2**70).map(lambda i: f"ep:{i}"),
        weird_text,
    )


def ref_param(world: World) -> Param:
    return Param(_pick(world.own_refs + world.own_episodes), refs(world))


def ref_list_param(world: World) -> Param:
    return Param(
        st.lists(_pick(world.own_refs + world.own_episodes), min_size=1, max_size=5),
        st.one_of(st.lists(refs(world), min_size=1, max_size=20), st.lists(refs(world), min_size=0, max_size=25),
                  st.lists(huge_text, min_size=1, max_size=2)),
        st.one_of(wrong_type, refs(world)),
    )


def _tampered(cursor: str, how: int) -> str:
    body, _, mac = cursor.partition(".")
    if how == 0:
        return f"{body}.{mac[::-1]}"
    if how == 1:
        forged = base64.urlsafe_b64encode(json.dumps([2**62, 1]).encode()).decode().rstrip("=")
        return f"{forged}.{mac}"
    if how == 2:
        return cursor + "="
    return f"{body}x.{mac}"


def cursor_param(world: World) -> Param:
    handles = world.own_cursors + world.foreign_cursors
    return Param(
        _pick(world.own_cursors),
        st.one_of(
            _pick(world.foreign_cursors),
            st.builds(_tampered, _pick(handles), st.integers(0, 3)) if handles else st.nothing(),
            st.sampled_from([".", "a.b", "a.b.c", "..", "e30.", "W10.x", "bnVsbA.AAAA", "x" * 201, "=.=", ""]),
            weird_text,
        ),
    )


def int_param(low: int, high: int) -> Param:
    return Param(st.integers(low, high), st.sampled_from([low - 1, low, high, high + 1, 0, -1, 10**9, 2**63]),
                 st.one_of(wrong_type, st.just("10"), st.floats(0, 100)))


def flag_param() -> Param:
    return Param(st.booleans(), st.booleans(), st.one_of(st.sampled_from(["true", "yes", 1, 0, "false"]), wrong_type))


def metadata_param() -> Param:
    big = st.builds(lambda n: {"blob": "m" * n}, st.sampled_from([100, 16_000, 20_000]))
    objects = st.dictionaries(st.one_of(weird_text, st.sampled_from(["$ne", "$or", "id", "tenant"])), json_values,
                              max_size=4)
    return Param(st.dictionaries(st.sampled_from(["k", "topic", "n"]), scalars, max_size=3),
                 st.one_of(deep.filter(lambda d: isinstance(d, dict)), objects, big))


def source_param(world: World) -> Param:
    return Param(
        st.builds(lambda i: {"id": i}, _pick(world.source_ids)),
        st.one_of(st.builds(lambda i: {"id": i}, st.one_of(hostile_text, wrong_type)),
                  st.just({"$ne": None}), st.just({"id": {"$ne": ""}}), st.just({}),
                  deep.filter(lambda d: isinstance(d, dict)),
                  st.dictionaries(weird_text, json_values, max_size=3)),
    )


def salience_param() -> Param:
    return Param(st.floats(0, 1), st.sampled_from([-0.1, 1.01, 1e308, -1e308, 0, 1, 5e-324]))


def timestamp_param() -> Param:
    good = st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-05-01T12:00:00Z", "2001-09-09T01:46:40.123456Z"])
    bad = st.sampled_from(["2026-01-01T00:00:00", "2026-13-01T00:00:00Z", "0001-01-01T00:00:00Z",
                           "9999-12-31T23:59:59+14:00", "1969-12-31T23:59:59Z", "now", "", "2026-01-01T00:00:00+25:00",
                           "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
    return Param(good, st.one_of(bad, weird_text), st.one_of(wrong_type, st.integers()))


def recall_params(world: World) -> dict[str, Param]:
    return {
        "query": Param(words, st.one_of(st.just(""), hostile_text)),
        "limit": int_param(1, 50),
        "viewer": pool(world.agents),
        "type": pool(["turn", "note", "handoff", "decision", "episode", "error"]),
        "session": pool(world.sessions),
        "agent": pool(world.agents),
        "channel": pool(["chat", "discord"]),
        "source_id": text_param(st.sampled_from(["discord:", "discord:1", "discord:1_", "slack:%", "slack:"])),
        "project_id": text_param(st.sampled_from(["", "proj-a", "@auto", "proj-b"])),
        "exclude_contents": Param(st.lists(words, max_size=3),
                                  st.one_of(st.lists(hostile_text, max_size=3),
                                            st.lists(words, min_size=201, max_size=201))),
        "deep": flag_param(),
        "full_content": flag_param(),
    }


def context_param() -> Param:
    def entries(role: SearchStrategy[Any], content: SearchStrategy[Any]) -> SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({"role": role, "content": content}, optional={"extra": junk})

    roles = st.sampled_from(["user", "assistant", "system", "tool"])
    return Param(
        st.lists(entries(roles, words), max_size=4),
        st.one_of(st.lists(entries(st.one_of(roles, hostile_text), st.one_of(words, hostile_text)), max_size=4),
                  st.lists(entries(roles, words), min_size=101, max_size=101)),
        st.one_of(st.lists(junk, min_size=1, max_size=3), wrong_type),
    )


EXTRA_ARGUMENTS: dict[str, SearchStrategy[Any]] = {
    "unknown_argument": junk, "$where": st.just("1 == 1"), "tenant_id": st.just(FOREIGN_TENANT),
}


def tool_arguments(world: World) -> dict[str, SearchStrategy[dict[str, Any]]]:
    """For each tool, a strategy of argument dictionaries."""
    session, agent = pool(world.sessions), pool(world.agents)
    content = Param(words, st.one_of(st.sampled_from(["", " ", "\x00", "\n\t", "orion\x00vault"]), hostile_text))
    keys = text_param(st.sampled_from(["k1", "k2", "k3"]))
    specs: dict[str, tuple[dict[str, Param], dict[str, Param]]] = {
        "add_memory": (
            {"tenant": tenants(), "session": session, "agent": agent, "content": content},
            {"type": pool(["turn", "note", "decision", "error", "handoff", "episode"]),
             "role": pool(["user", "assistant"]), "channel": pool(["chat", "discord"]),
             "source": source_param(world), "project_id": pool(["proj-a", ""]), "salience": salience_param(),
             "visibility": Param(st.sampled_from(["tenant", "agent"]), hostile_text),
             "timestamp": timestamp_param(), "idempotency_key": keys, "metadata": metadata_param()},
        ),
        "recall": ({"tenant": tenants()}, recall_params(world)),
        "recall_with_context": ({"tenant": tenants(), "context": context_param()}, recall_params(world)),
        "get_contents": ({"tenant": tenants(), "refs": ref_list_param(world)}, {"viewer": pool(world.agents)}),
        "query_recent_turns": (
            {"tenant": tenants(), "session": session},
            {"limit": int_param(1, 100), "cursor": cursor_param(world), "viewer": pool(world.agents)},
        ),
        "check_memory": ({"tenant": tenants(), "ref": ref_param(world)}, {"viewer": pool(world.agents)}),
        "create_handoff": (
            {"tenant": tenants(), "session": session, "agent": agent, "content": content},
            {"project_id": pool(["proj-a"]), "idempotency_key": keys},
        ),
        "delete_memory": ({"tenant": tenants(), "ref": ref_param(world)}, {}),
        "recover_context": (
            {"tenant": tenants(), "session": session},
            {"viewer": pool(world.agents), "turns": int_param(1, 100)},
        ),
        "summarize_session": ({"tenant": tenants(), "session": session}, {}),
        "update_memory": (
            {"tenant": tenants(), "ref": ref_param(world), "agent": agent},
            {"content": content, "metadata": metadata_param(), "salience": salience_param()},
        ),
        "lock_memory": ({"tenant": tenants(), "ref": ref_param(world)}, {"viewer": pool(world.agents)}),
        "related": (
            {"tenant": tenants(),
             "entity": Param(st.one_of(_pick(world.own_refs), st.sampled_from(["Alice", "alice", "ent:1", "discord"])),
                             st.one_of(refs(world), hostile_text))},
            {"depth": int_param(1, 3), "limit": int_param(1, 50), "viewer": pool(world.agents)},
        ),
        "unlock_memory": ({"tenant": tenants(), "ref": ref_param(world)}, {"viewer": pool(world.agents)}),
    }
    return {tool: _arguments(required, optional) for tool, (required, optional) in specs.items()}


@st.composite
def _arguments(draw: st.DrawFn, required: dict[str, Param], optional: dict[str, Param]) -> dict[str, Any]:
    """A call's arguments: well formed (a quarter), well formed with one to three arguments
    made hostile or left out (half), or anything of any type (a quarter)."""
    params = {**required, **optional}
    names = [*required, *(name for name in optional if draw(st.booleans()))]
    mode = draw(st.sampled_from(["valid", "mutated", "mutated", "wild"]))
    if mode == "wild":
        arguments = {name: draw(params[name].wild()) for name in names}
        arguments.update(draw(st.fixed_dictionaries({}, optional=EXTRA_ARGUMENTS)))
        dropped = draw(st.lists(st.sampled_from(list(required)), max_size=2, unique=True))
        return {name: value for name, value in arguments.items() if name not in dropped}
    arguments = {name: draw(params[name].valid) for name in names}
    if mode == "mutated":
        for name in draw(st.lists(st.sampled_from(list(params)), min_size=1, max_size=3, unique=True)):
            if name in required and draw(st.integers(0, 5)) == 0:
                arguments.pop(name, None)
            else:
                arguments[name] = draw(params[name].hostile)
    return arguments

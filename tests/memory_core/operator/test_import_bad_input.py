"""Sources that used to crash an import instead of being refused (issue 46.7): lone surrogate escapes,
JSON nested 200,000 deep, YAML front matter whose aliases expand to billions of values, and a note of
50,000 ``[[`` that took minutes. Each must be a coded error naming file, line and field, skippable
with ``--skip-bad``, read in bounded memory and time.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.importers import import_source
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def contents(core: MemoryCore, tenant: str = "acme") -> list[str]:
    return sorted(r["content"] for r in export_tenant(core.operator_parts(), tenant))


def refused(report: Any) -> list[tuple[Any, ...]]:
    return [(e["line"], e["field"], e["code"]) for e in report.error_items]


# ---- memory-core's own JSONL ---------------------------------------------------------------------------

def own_line(store: MemoryCore, content: str) -> str:
    """An export line as memory-core writes it (written by a real add, exported, then removed)."""
    ref = store.add_memory("scratch", "s1", "bob", content, type="note").ref
    line = json.dumps(next(r for r in export_tenant(store.operator_parts(), "scratch") if r["ref"] == ref))
    return line.replace('"tenant": "scratch"', '"tenant": "acme"')


def test_a_lone_surrogate_in_a_jsonl_line_is_refused_naming_its_line_and_field(store: MemoryCore) -> None:
    first, second, third = (own_line(store, f"fact {n} PLACEHOLDER") for n in (1, 2, 3))
    bad = second.replace("PLACEHOLDER", "\\ud800")  # the JSON escape, as json.dumps writes a lone surrogate
    counts = import_lines(store.operator_parts(), [first, bad, third], "acme")
    assert (counts.written, counts.errors, counts.stopped_at) == (1, 1, 2)
    assert counts.error_lines[0]["field"] == "content" and counts.error_lines[0]["line"] == 2
    assert "lone surrogate" in counts.error_lines[0]["message"]
    again = import_lines(store.operator_parts(), [first, bad, third], "acme", skip_bad=True)
    assert (again.written, again.skipped, again.errors) == (1, 1, 1)


def test_a_jsonl_line_nested_200000_deep_is_refused_naming_the_field(store: MemoryCore) -> None:
    good = own_line(store, "a fine fact")
    deep = own_line(store, "a deep one").replace('"metadata": {}', f'"metadata": {{"x": {DEEP}}}')
    digits = own_line(store, "a long number").replace('"salience": 0.5', '"salience": ' + "9" * 5000)
    counts = import_lines(store.operator_parts(), [deep, digits, good], "acme", skip_bad=True)
    assert [(e["line"], e["field"], e["code"]) for e in counts.error_lines] == [
        (1, "metadata.x", "INVALID_INPUT"), (2, "salience", "INVALID_INPUT")]
    assert "nested deeper" in counts.error_lines[0]["message"] and counts.written == 1


# ---- mem0 ---------------------------------------------------------------------------------------------

def mem0_memory(n: int, text: str = "", **extra: Any) -> dict[str, Any]:
    return {"id": f"0b6f1c9e-3f0a-4f7e-9a63-1d1b5a0c7e{n:02d}", "memory": text or f"Prefers option {n}",
            "hash": None, "metadata": None, "created_at": "2026-02-20T08:15:30.123456-08:00", "updated_at": None,
            "user_id": "alice"} | extra


def starts(dump: Path, n: int) -> int:
    """The line the mem0 memory ``n`` of a pretty-printed dump starts on (its ``{``)."""
    lines = dump.read_text(encoding="utf-8").split("\n")
    return next(i for i, line in enumerate(lines, 1) if f'c7e{n:02d}"' in line) - 1


def test_a_lone_surrogate_in_a_mem0_memory_is_refused_naming_line_and_field(store: MemoryCore,
                                                                             tmp_path: Path) -> None:
    dump = tmp_path / "get_all.json"
    dump.write_text(json.dumps({"results": [mem0_memory(1), mem0_memory(2, "Lives in \ud800 town"),
                                            mem0_memory(3, metadata={"note": "x\udfffy"})]}, indent=2))
    report = import_source(store.operator_parts(), "mem0", dump, "acme", skip_bad=True)
    assert refused(report) == [(starts(dump, 2), "memory", "INVALID_INPUT"),
                               (starts(dump, 3), "metadata.note", "INVALID_INPUT")]
    assert contents(store) == ["Prefers option 1"]
    lines = tmp_path / "memories.jsonl"
    lines.write_bytes(json.dumps(mem0_memory(4)).encode() + b"\n"
                      + json.dumps(mem0_memory(5)).encode().replace(b"option", b"opti\xffon") + b"\n"
                      + json.dumps(mem0_memory(6, "Drinks \ud83d\ude00 tea")).encode() + b"\n")  # a valid pair
    report = import_source(store.operator_parts(), "mem0", lines, "acme", skip_bad=True)
    assert refused(report) == [(2, None, "INVALID_INPUT")] and "byte 0xff" in report.error_items[0]["message"]
    assert "Drinks 😀 tea" in contents(store) and report.written == 2


def test_mem0_json_nested_200000_deep_is_refused_and_the_rest_imported(store: MemoryCore, tmp_path: Path) -> None:
    dump = tmp_path / "get_all.json"
    text = json.dumps({"results": [mem0_memory(1), "DEEP", mem0_memory(2)]}, indent=2)
    dump.write_text(text.replace('"DEEP"', f'{{"id": "d", "memory": "deep", "metadata": {DEEP}}}'))
    report = import_source(store.operator_parts(), "mem0", dump, "acme", skip_bad=True)
    deep_line = starts(dump, 2) - 1  # on its own line, between the first memory and the second
    assert refused(report) == [(deep_line, "metadata", "INVALID_INPUT")] and report.written == 2
    whole = tmp_path / "deep.json"
    whole.write_text(DEEP)
    report = import_source(store.operator_parts(), "mem0", whole, "acme", skip_bad=True)
    assert refused(report) == [(1, "[0]", "INVALID_INPUT")] and report.written == 0


def test_an_mcp_memory_line_nested_200000_deep_is_refused(store: MemoryCore, tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join([
        json.dumps({"type": "entity", "name": "Ok", "entityType": "thing", "observations": ["fine"]}),
        '{"type": "entity", "name": "Deep", "entityType": "thing", "observations": ' + DEEP + "}",
        json.dumps({"type": "entity", "name": "Odd", "entityType": "thing", "observations": ["a", "b\udc80"]})]))
    report = import_source(store.operator_parts(), "mcp-memory", path, "acme", skip_bad=True)
    assert refused(report) == [(2, "observations", "INVALID_INPUT"), (3, "observations[1]", "INVALID_INPUT")]
    assert contents(store) == ["Ok: fine"]


# ---- YAML front matter ---------------------------------------------------------------------------------

BOMB = textwrap.dedent("""\
    ---
    title: Billion Laughs
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    tags: *i
    ---
    # Billion Laughs
    - [fact] the body is fine
    """)


def read_in_512_mib(source: str, path: Path) -> list[dict[str, Any]]:
    """What the reader yields for ``path``, read in a child process that may use at most 512 MiB."""
    code = textwrap.dedent(f"""
        import json, resource, sys
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_AS, ({512 << 20}, {512 << 20}))
        from memory_core.importers import basic_memory, markdown
        reader = {{"basic-memory": basic_memory, "markdown": markdown}}[{source!r}]
        out = [{{"kind": type(got).__name__, "where": got.where.to_dict(), "message": got.message}}
               for got in reader.read(Path({str(path)!r})) if type(got).__name__ in ("Problem", "Note")]
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (60, 60)))
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def test_a_front_matter_of_nine_levels_of_aliases_is_refused_in_bounded_memory(store: MemoryCore,
                                                                               tmp_path: Path) -> None:
    note = tmp_path / "notes" / "laughs.md"
    note.parent.mkdir()
    note.write_text(BOMB, encoding="utf-8")
    assert len(BOMB.encode()) < 700
    got = read_in_512_mib("basic-memory", note)
    assert [(g["kind"], g["where"]["line"], g["where"]["field"]) for g in got] == [("Problem", 7, "front matter")]
    assert "expands to more than 10,000 values" in got[0]["message"]
    (tmp_path / "notes" / "fine.md").write_text("---\ntitle: Fine\n---\n# Fine\n- [fact] all good\n")
    report = import_source(store.operator_parts(), "basic-memory", tmp_path / "notes", "acme", skip_bad=True)
    assert refused(report) == [(7, "front matter", "INVALID_INPUT")] and contents(store) == ["all good"]
    markdown = read_in_512_mib("markdown", note)  # Markdown ignores front matter it cannot read, and says so
    assert [(g["kind"], g["where"]["line"]) for g in markdown] == [("Note", 7)]  # e: the level past 10,000


def test_front_matter_that_refers_to_itself_or_nests_deep_is_refused(store: MemoryCore, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "self.md").write_text("---\ntitle: Loop\nloop: &a [1, *a]\n---\n# Loop\n")
    (notes / "deep.md").write_text("---\ntitle: Deep\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n# Deep\n")
    report = import_source(store.operator_parts(), "basic-memory", notes, "acme", skip_bad=True)
    assert sorted((e["file"], e["line"], e["field"]) for e in report.error_items) == [
        ("deep.md", 2, "front matter"), ("self.md", 3, "front matter")]


def test_a_note_of_50000_unclosed_wikilinks_is_read_in_one_pass(tmp_path: Path) -> None:
    note = tmp_path / "brackets.md"
    note.write_text("# Brackets\n\n- " + "[[a " * 50_000 + "\n\n- see [[Target]] and [[Other|shown]]\n")
    code = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))  # was minutes: one regex scan per "[["
        from memory_core.importers import basic_memory
        items = list(basic_memory.read(Path({str(note)!r})))
        print([r["to"] for item in items for r in item.relations])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['Target', 'Other']"

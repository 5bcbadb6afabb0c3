"""The README and docs/ say what the code does: their commands run, their names exist, their links resolve.

Every fenced block of README.md and docs/*.md has an info string, and what it says decides what
happens to the block:

- ```` ```sh ````: run. Each line is a ``memory-core`` command (``\\`` continues a line, ``#``
  starts a comment, ``> FILE`` / ``< FILE`` redirect), run through the CLI in this process against
  a temporary working directory (so the default data directory, ``.memory-core``, is a fresh one)
  with the hash embedder; every command must exit 0. One directory per document: its blocks
  run in order, and later ones see what earlier ones wrote.
- ```` ```python ````: executed, in the same directory and environment.
- ```` ```toml ```` / ```` ```json ````: parsed; a TOML block must also load as a memory-core config file.
- ```` ```<lang> example ````: an example of a real deployment (a server, a network, a model
  download, a path of the reader's): not run. Its ``memory-core`` commands are still checked
  against the CLI (command names and options), and a Python example must compile.
- ```` ```text ````: output or a picture, never run.

Also checked: README.md's length and its two commands; every relative link (and its ``#anchor``);
every repository path, ``python -m`` module, setting, ``MEMORY_CORE_*`` variable, ``memory-core``
command and MCP tool the docs name; the generated settings reference (``tests.support.settings_doc``).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import tomllib
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
from markdown_it import MarkdownIt
from markdown_it.token import Token
from typer.testing import CliRunner

from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from memory_core.settings.sources import BINDING_ENV, NON_SETTING_ENV, TEST_ENV_PREFIX, setting_variables
from testbed.paths import ROOT
from tests.support import settings_doc
from tools.cli.app import app
from tools.registry import TOOL_SPECS

README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"sh", "python"}
PARSED_LANGS = {"toml", "json"}
EXAMPLE_ONLY_LANGS = {"sql"}  # commands for another program: always an example
LANGS = RUN_LANGS | PARSED_LANGS | EXAMPLE_ONLY_LANGS | {"text"}
SERVERS = {"serve", "ui"}  # commands that do not return: only in example blocks
REPO_DIRS = ("memory_core", "graph", "tools", "tests", "bench", "docs", "examples")
PATH_RE = re.compile(rf"^(?:{'|'.join(REPO_DIRS)})/[\w./-]*$")
MCP_METHODS = {"tools/list", "tools/call"}  # MCP methods, not paths
# paths the layout no longer has, named on purpose: architecture.md's "before" column
FORMER_PATHS = {"docs/architecture.md": {"memory_core/graph_backend.py"}}
FILE_SUFFIXES = (".py", ".md", ".toml", ".json", ".sh", ".jsonl", ".sqlite3", ".lock")
MODULE_RE = re.compile(rf"python3?(?:\.\d+)? -m ((?:{'|'.join(REPO_DIRS[:5])})(?:\.\w+)*)([^`\n]*)")
ENV_RE = re.compile(r"\bMEMORY_CORE_[A-Z0-9_]*[A-Z0-9]\b")
LINK_SCHEMES = ("http://", "https://", "mailto:")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    example: bool
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@cache
def tokens(doc: Path) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(doc.read_text(encoding="utf-8"))


def blocks(doc: Path) -> list[Block]:
    out = []
    for tok in tokens(doc):
        if tok.type in ("fence", "code_block"):
            words = tok.info.split()
            line = (tok.map[0] if tok.map else 0) + 1
            out.append(Block(doc, line, words[0] if words else "", words[1:] == ["example"], tok.content))
    return out


def inlines(doc: Path) -> Iterator[Token]:
    """Every inline child token (text, code spans, links) of the document."""
    for tok in tokens(doc):
        if tok.type == "inline" and tok.children:
            yield from tok.children


def code_spans(doc: Path) -> list[str]:
    return [t.content for t in inlines(doc) if t.type == "code_inline"]


def prose_and_code(doc: Path) -> str:
    """The document without its text blocks (output, pictures): what names must be real in."""
    text = doc.read_text(encoding="utf-8")
    for b in blocks(doc):
        if b.lang == "text":
            text = text.replace(b.text, "")
    return text


def ids(docs: list[Path]) -> list[str]:
    return [str(d.relative_to(ROOT)) for d in docs]


# ---- the README's shape -------------------------------------------------------------------------


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the depth belongs in docs/"
    head = "\n".join(lines[:40])
    assert "make serve" in head and "make test" in head


def test_the_readme_says_where_the_command_is_before_its_first_memory_core_command() -> None:
    """`make serve` installs into the checkout's venv: nothing puts `memory-core` on PATH, so a newcomer
    running the README's next command needs to be told (issue 47.16)."""
    text = README.read_text(encoding="utf-8")
    after_two = text.index("make test") + len("make test")
    first_use = text.index("memory-core serve", after_two)
    assert ".venv/bin/memory-core" in text[after_two:first_use]


def test_git_ignores_the_config_file_init_writes_in_the_checkout() -> None:
    """`memory-core init` writes memory-core.toml where it runs; it holds token hashes once tokens are added."""
    import subprocess

    out = subprocess.run(["git", "check-ignore", "-q", "memory-core.toml"], cwd=ROOT, capture_output=True)
    assert out.returncode == 0


def test_readme_links_every_doc() -> None:
    linked = {t.attrGet("href") for t in inlines(README) if t.type == "link_open"}
    linked_files = {str(h).split("#")[0] for h in linked if h}
    missing = [d.name for d in DOCS[1:] if f"docs/{d.name}" not in linked_files]
    assert not missing, f"README.md links no {missing}"


@pytest.mark.parametrize("doc", DOCS[1:], ids=ids(DOCS[1:]))
def test_every_doc_links_onwards(doc: Path) -> None:
    links = [t.attrGet("href") for t in inlines(doc) if t.type == "link_open"]
    assert any(h and not str(h).startswith((*LINK_SCHEMES, "#")) for h in links), \
        f"{doc.name} links no other document"


# ---- blocks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_every_block_says_what_it_is(doc: Path) -> None:
    for b in blocks(doc):
        assert b.lang, f"{b.where()}: an indented or unlabelled code block; use a fence with one of {sorted(LANGS)}"
        assert b.lang in LANGS, f"{b.where()}: unknown block language {b.lang!r}; use one of {sorted(LANGS)}"
        assert b.example or b.lang not in EXAMPLE_ONLY_LANGS, f"{b.where()}: mark the {b.lang} block `example`"
        if b.lang == "json":
            json.loads(b.text)
        elif b.lang == "toml":
            tomllib.loads(b.text)
        elif b.lang == "python" and b.example:
            compile(b.text, b.where(), "exec")
        elif b.lang == "sh":
            for argv in shell_commands(b):
                if argv[0] == "memory-core":
                    check_invocation(argv, b.where())
                    assert b.example or argv[1] not in SERVERS, \
                        f"{b.where()}: `memory-core {argv[1]}` does not return; mark the block `sh example`"
                else:
                    assert b.example, f"{b.where()}: only memory-core commands run here; mark the block `sh example`"


def shell_commands(block: Block) -> list[list[str]]:
    joined = block.text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        try:
            argv = shlex.split(line, comments=True)
        except ValueError as exc:
            raise AssertionError(f"{block.where()}: cannot split {line!r}: {exc}") from exc
        if argv:
            out.append(argv)
    return out


@cache
def cli_command() -> Any:
    """The CLI as Typer builds it (a click group of Typer's own click: read by duck typing)."""
    command = typer.main.get_command(app)
    assert hasattr(command, "commands")
    return command


def check_invocation(argv: list[str], where: str) -> None:
    """``memory-core COMMAND [--options]``: the command exists and takes every option named."""
    words = [w.strip("[]()|,.;") for w in argv[1:]]
    words = [w for w in words if w]
    if not words or words[0].startswith("-"):
        assert all(w in ("--help", "--version") for w in words if w.startswith("-")), f"{where}: {argv}"
        return
    if not re.fullmatch(r"[a-z]+", words[0]):
        return  # a placeholder: memory-core <command> --help
    group = cli_command()
    command = group.commands.get(words[0])
    assert command is not None, f"{where}: memory-core has no command {words[0]!r}"
    if hasattr(command, "commands") and len(words) > 1 and words[1] in command.commands:
        command = command.commands[words[1]]
    options = {"--help"}
    for param in command.params:
        options.update(param.opts)
        options.update(param.secondary_opts)
    for word in words[1:]:
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            if re.fullmatch(r"--?[a-z][a-z-]*", name):
                assert name in options, f"{where}: `memory-core {words[0]}` has no option {name}"


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_the_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runnable = [b for b in blocks(doc) if not b.example and b.lang in RUN_LANGS | {"toml"}]
    if not runnable:
        pytest.skip("nothing to run")
    for name in [k for k in os.environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for b in runnable:
        if b.lang == "toml":
            path = tmp_path / f"block-{b.line}.toml"
            path.write_text(b.text, encoding="utf-8")
            load_settings(path, environ={})  # a config fragment memory-core accepts
        elif b.lang == "python":
            namespace: dict[str, Any] = {"__name__": "__docs__"}
            exec(compile(b.text, b.where(), "exec"), namespace)  # the docs' own snippets
        else:
            for argv in shell_commands(b):
                run_cli(runner, argv, b, tmp_path)


def run_cli(runner: CliRunner, argv: list[str], block: Block, cwd: Path) -> None:
    args, stdin, stdout = [], None, None
    words = iter(argv[1:])
    for word in words:
        if word == ">":
            stdout = cwd / next(words)
        elif word == "<":
            stdin = (cwd / next(words)).read_text(encoding="utf-8")
        else:
            args.append(word)
    result = runner.invoke(app, args, input=stdin)
    shown = shlex.join(argv)
    assert result.exit_code == 0, f"{block.where()}: `{shown}` exited {result.exit_code}:\n{result.output}"
    if stdout is not None:
        stdout.write_text(result.stdout, encoding="utf-8")


def test_the_readme_harness_example_talks_to_a_real_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's HTTP harness, as written, against `serve --http` with an agent token."""
    from testbed.mcp_harness import running_http_server
    from tools.auth import hash_token

    example = next(b for b in blocks(README) if b.lang == "python" and "streamable_http_client" in b.text)
    token = "docs-harness-token"
    config = tmp_path / "memory-core.toml"
    config.write_text(f'[server.tokens]\n"{hash_token(token)}" = {{ tenant = "acme", agent = "planner" }}\n',
                      encoding="utf-8")
    with running_http_server(tmp_path / "data", config=config) as url:
        code = example.text.replace("http://127.0.0.1:8765/mcp", url).replace("<token>", token)
        assert code != example.text
        exec(compile(code, example.where(), "exec"), {"__name__": "__docs__"})  # the README's own snippet
    printed = capsys.readouterr().out
    assert "Staging moved to eu-west-2." in printed, printed


# ---- names the docs use -------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_links_resolve(doc: Path) -> None:
    for tok in inlines(doc):
        href = tok.attrGet("href") if tok.type == "link_open" else tok.attrGet("src") if tok.type == "image" else None
        if not href or str(href).startswith(LINK_SCHEMES):
            continue
        target, _, anchor = str(href).partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.relative_to(ROOT)}: link to {href} names no file"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.relative_to(ROOT)}: {href}: no heading #{anchor} in {path.name}"


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = text.strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    toks = tokens(doc)
    for i, tok in enumerate(toks):
        if tok.type == "heading_open":
            inline = toks[i + 1]
            text = "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))
            base = slug(text)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_named_paths_and_modules_exist(doc: Path) -> None:
    words = list(code_spans(doc))
    for b in blocks(doc):
        if b.lang == "sh":
            words += [w for argv in shell_commands(b) for w in argv]
    former = FORMER_PATHS.get(str(doc.relative_to(ROOT)), set())
    for word in words:
        if PATH_RE.match(word) and word not in MCP_METHODS | former and not any(c in word for c in "*<>…"):
            assert (ROOT / word.rstrip("/")).exists(), f"{doc.relative_to(ROOT)} names {word}, which does not exist"
    for module, rest in MODULE_RE.findall(prose_and_code(doc)):
        where = ROOT.joinpath(*module.split("."))
        source = next((p for p in (where.with_suffix(".py"), where / "__main__.py") if p.exists()), None)
        assert source or (where / "__init__.py").exists(), \
            f"{doc.relative_to(ROOT)} runs python -m {module}, which does not exist"
        if source is not None and module.startswith("bench."):
            text = source.read_text(encoding="utf-8")
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
                assert f'"{flag}"' in text or f"'{flag}'" in text, \
                    f"{doc.relative_to(ROOT)}: python -m {module} has no option {flag}"


DOTTED_RE = re.compile(r"^(?:memory_core|graph|tools)(?:\.[A-Za-z_]\w*)+$")


def resolves(dotted: str) -> bool:
    """``memory_core.recall.collapse.fact_key``: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_named_python_objects_exist(doc: Path) -> None:
    for span in code_spans(doc):
        name = span.split("(")[0]
        if DOTTED_RE.match(name) and not name.endswith(FILE_SUFFIXES):
            assert resolves(name), f"{doc.relative_to(ROOT)} names {name}, which does not exist"


@cache
def setting_names() -> frozenset[str]:
    names = set()
    for section, field in Settings.model_fields.items():
        names.add(section)
        names.update(f"{section}.{key}" for key in field.annotation.model_fields)  # type: ignore[union-attr]
    return frozenset(names)


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_named_settings_exist(doc: Path) -> None:
    sections = "|".join(Settings.model_fields)
    setting = re.compile(rf"^\[?((?:{sections})(?:\.[a-z0-9_]+)?)\]?(?:\s*=.*)?$")
    for span in code_spans(doc):
        m = setting.match(span)
        if m and span.endswith(FILE_SUFFIXES):
            continue  # a file (server.py), not a setting
        if m and ("." in m.group(1) or span.startswith("[")):
            assert m.group(1) in setting_names() or m.group(1) == "server.tokens", \
                f"{doc.relative_to(ROOT)} names the setting {span!r}, which does not exist"


@cache
def known_variables() -> frozenset[str]:
    """Settings variables, the binding ones, and those the product or the benchmarks read."""
    names = set(setting_variables()) | set(BINDING_ENV) | set(NON_SETTING_ENV)
    for folder in ("memory_core", "tools", "graph", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(ENV_RE.findall(path.read_text(encoding="utf-8")))
    return frozenset(names)


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_named_variables_exist(doc: Path) -> None:
    for name in set(ENV_RE.findall(prose_and_code(doc))):
        if name.startswith(TEST_ENV_PREFIX):
            continue
        assert name in known_variables(), f"{doc.relative_to(ROOT)} names {name}, which nothing reads"


@pytest.mark.parametrize("doc", DOCS, ids=ids(DOCS))
def test_named_commands_exist(doc: Path) -> None:
    for span in code_spans(doc):
        if span.startswith("memory-core ") or span == "memory-core":
            try:
                argv = shlex.split(span)
            except ValueError:
                argv = span.split()
            check_invocation(argv, f"{doc.relative_to(ROOT)}: `{span}`")


def test_readme_and_the_tools_reference_name_every_tool() -> None:
    readme = set(code_spans(README))
    tools_doc = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    for spec in TOOL_SPECS:
        assert spec.name in readme, f"README.md's tool table lacks {spec.name}"
        assert f"### `{spec.name}`" in tools_doc, f"docs/tools.md has no section for {spec.name}"
    documented = set(re.findall(r"^### `([a-z_]+)`", tools_doc, flags=re.M))
    assert documented <= {s.name for s in TOOL_SPECS}, f"docs/tools.md documents tools that do not exist: " \
        f"{documented - {s.name for s in TOOL_SPECS}}"


def test_the_cli_reference_names_every_command() -> None:
    cli_doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    for name, command in cli_command().commands.items():
        assert f"### `memory-core {name}" in cli_doc, f"docs/cli.md has no section for memory-core {name}"
        assert f"`{name}" in readme, f"README.md's CLI table lacks {name}"
        if hasattr(command, "commands"):
            for sub in command.commands:
                assert f"memory-core {name} {sub}" in cli_doc


# ---- the settings reference -------------------------------------------------------------------


def test_the_settings_reference_is_generated_from_the_schema() -> None:
    doc = settings_doc.DOC.read_text(encoding="utf-8")
    assert settings_doc.render(doc) == doc, "docs/configuration.md is out of date: python -m tests.support.settings_doc"


def test_every_setting_is_in_the_configuration_doc() -> None:
    doc = settings_doc.DOC.read_text(encoding="utf-8")
    for name in setting_names():
        if "." in name:
            assert f"`{name}`" in doc, f"docs/configuration.md lacks {name}"

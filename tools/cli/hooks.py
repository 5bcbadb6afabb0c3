"""hook (a harness's lifecycle event) and hooks install / uninstall (Claude Code's settings.json).

``memory-core hook`` itself lives in :mod:`tools.cli.hook` (the launcher runs it before Typer
loads); it is registered here too, so ``memory-core --help`` lists it and ``python -m tools.cli hook``
behaves the same.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from memory_core import InvalidInputError
from memory_core.harness import hook_entries, merge_hooks, read_harness_settings, remove_hooks, write_harness_settings
from tools.cli import hook as hook_command
from tools.cli import render
from tools.cli.common import JSON_META, ConfigOpt, DataDirOpt, JsonOpt

group = typer.Typer(help="Install memory-core's hooks in Claude Code's settings.json, or take them out.",
                    no_args_is_help=True)

ProjectOpt = Annotated[bool, typer.Option("--project", help="This project's .claude/settings.json.")]
UserOpt = Annotated[bool, typer.Option("--user", help="Your ~/.claude/settings.json (the default).")]
SettingsOpt = Annotated[Path | None, typer.Option("--settings", help="Another settings.json to edit.")]


def hook(ctx: typer.Context) -> None:
    """Run by a harness on each lifecycle event: the event's JSON on stdin; prints what the harness reads.

    Captures the transcript (Stop, PreCompact, SessionEnd), writes a handoff before a compaction and
    injects one block of recalled memory at session start (Claude Code's SessionStart). Always exits 0.
    Options: --data-dir, --config, --tenant, --agent, --store auto|shared|direct, --prompt-injection;
    `memory-core hook --help` lists them. See docs/harness.md.
    """
    hook_command.main(ctx.args)


@group.command()
def install(
    ctx: typer.Context,
    project: ProjectOpt = False,
    user: UserOpt = False,
    settings: SettingsOpt = None,
    tenant: Annotated[str | None, typer.Option("--tenant", "-t", help="Bind this tenant in the command "
                                               "(default: MEMORY_CORE_TENANT when the hook runs).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Bind this agent in the command.")] = None,
    prompt_injection: Annotated[bool, typer.Option("--prompt-injection", help="Also inject relevant memories on "
                                                   "each prompt (UserPromptSubmit; off by default).")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Merge memory-core's hooks into Claude Code's settings.json, keeping every other hook.

    SessionStart (startup, resume, compact), PreCompact, Stop and SessionEnd run `memory-core hook`
    with the options given here (absolute paths); running it again replaces them, it never adds twice.

    Example: memory-core hooks install --user --data-dir ~/.memory-core --tenant me

    JSON: {"settings", "command", "events"}
    """
    ctx.meta[JSON_META] = json_out
    path = _target(project, user, settings)
    command = hook_command_line(data_dir=data_dir, config=config, tenant=tenant, agent=agent)
    wanted = hook_entries(command, prompt_injection=prompt_injection)
    write_harness_settings(path, merge_hooks(read_harness_settings(path), wanted))
    events = [e.event for e in wanted]
    if json_out:
        render.emit_json({"settings": str(path), "command": command, "events": events})
        return
    typer.echo(f"memory-core's hooks are in {path}: {', '.join(events)}.")
    typer.echo(f"Each runs: {command}")


@group.command()
def uninstall(
    ctx: typer.Context,
    project: ProjectOpt = False,
    user: UserOpt = False,
    settings: SettingsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Take memory-core's hooks out of Claude Code's settings.json; every other hook stays.

    Example: memory-core hooks uninstall --user

    JSON: {"settings", "removed"}
    """
    ctx.meta[JSON_META] = json_out
    path = _target(project, user, settings)
    current = read_harness_settings(path)
    left, removed = remove_hooks(current)
    if removed:
        write_harness_settings(path, left)
    if json_out:
        render.emit_json({"settings": str(path), "removed": removed})
        return
    typer.echo(f"Removed {removed} memory-core hook command(s) from {path}." if removed else
               f"{path} holds no memory-core hook.")


def _target(project: bool, user: bool, settings: Path | None) -> Path:
    if sum([project, user, settings is not None]) > 1:
        raise InvalidInputError("Give one of --project, --user or --settings.", field="settings")
    if settings is not None:
        return settings.expanduser().resolve()
    if project:
        return Path.cwd() / ".claude" / "settings.json"
    return Path.home() / ".claude" / "settings.json"


def hook_command_line(*, data_dir: Path | None = None, config: Path | None = None, tenant: str | None = None,
                      agent: str | None = None) -> str:
    """The shell command a harness runs: this installation's ``memory-core hook`` with absolute paths."""
    found = shutil.which("memory-core")
    launcher = Path(sys.argv[0])
    if launcher.name == "memory-core" and launcher.is_file():
        program = [str(launcher.resolve())]
    elif found:
        program = [found]
    else:  # run from a checkout without the script on PATH: this interpreter, safe from shadowing packages
        program = [sys.executable, "-P", "-m", "memory_core"]
    args = [*program, "hook"]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir.expanduser().resolve())]
    if config is not None:
        args += ["--config", str(config.expanduser().resolve())]
    if tenant is not None:
        args += ["--tenant", tenant]
    if agent is not None:
        args += ["--agent", agent]
    return shlex.join(args)


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                  "help_option_names": []})(hook)
    app.add_typer(group, name="hooks")

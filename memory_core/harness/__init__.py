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
- :mod:`~memory_core.harness.install`: our entries merged into (or taken out of) Claude Code's ``settings.json``.
"""

"""The canonical's text written by the configured model: opt-in (``consolidation.model_canonical``, or
``memory-core consolidate --model-canonical``), fail-soft, guarded.

LLM-free consolidation keeps the text of the member most typical of its cluster. With this on, the model
of ``[model_provider]`` is asked (within ``consolidation.model_timeout_s``, as the hook asks it for a
handoff) to write one text from the members' texts, keeping every fact, number, name and negation. Its
answer is used only when it passes :func:`guard`: not empty, no secret (:mod:`memory_core.secret_guard`),
no poisoning flag the members do not raise (:mod:`memory_core.write.poisoning`), not longer than twice the
longest member, no number or negation of the members dropped and none added, and at least
:data:`KEPT_WORDS` of the words every member uses kept (a fluent answer about something else is refused).
Otherwise — or when the provider is off, fails or times out — the canonical keeps the LLM-free text, and
its provenance says why: ``metadata.consolidated.text`` is ``{"by": "model", "model": ...}`` or
``{"by": "member", "fallback": <reason>}``. Everything else of a merge (its members as provenance, the
version chain, undo) is the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memory_core.operator.consolidation import NEGATIONS, WORD, Merge, _numeric, words
from memory_core.secret_guard import detect
from memory_core.write.poisoning import scan

if TYPE_CHECKING:
    from memory_core.provider.client import ModelClient
    from memory_core.settings.schema import Settings

PROMPT = (
    "These notes say the same thing in different words. Write it once, as one note in plain text. Keep every "
    "fact, number, name and negation exactly as the notes state them; add nothing; no preamble, no quotes, "
    "at most {chars} characters.\n\n{notes}"
)
EMPTY = "empty response"
TOO_LONG = "too long"
DROPPED_NUMBER = "dropped a number"
ADDED_NUMBER = "added a number"
DROPPED_NEGATION = "dropped a negation"
ADDED_NEGATION = "added a negation"
SECRET = "holds a secret"
FLAGGED = "raises a poisoning flag"
DROPPED_WORDS = "dropped words the members share"
KEPT_WORDS = 0.6  # least share of the words every member uses that the model's text must keep
_CONTRACTED = re.compile(r"n't\b|n’t\b", re.IGNORECASE)


def numbers(text: str) -> frozenset[str]:
    """The numeric words of ``text`` (as consolidation compares them)."""
    return frozenset(w for w in WORD.findall(text.lower()) if _numeric(w))


def negations(text: str) -> frozenset[str]:
    """The negations of ``text``, contractions read as ``not`` ("isn't" and "is not" are one negation)."""
    found = {w for w in WORD.findall(_CONTRACTED.sub(" not", text).lower()) if w in NEGATIONS}
    return frozenset("not" if w == "cannot" else w for w in found)


def guard(text: str, members: Sequence[str]) -> str | None:
    """Why the model's ``text`` must not stand for ``members`` (None: it may)."""
    if not text.strip():
        return EMPTY
    if detect(text):
        return SECRET
    if set(scan(text)) - {f for m in members for f in scan(m)}:
        return FLAGGED
    if len(text) > 2 * max(len(m) for m in members):
        return TOO_LONG
    have = numbers(text)
    want = frozenset().union(*(numbers(m) for m in members))
    if want - have:
        return DROPPED_NUMBER
    if have - want:
        return ADDED_NUMBER
    said = negations(text)
    meant = frozenset().union(*(negations(m) for m in members))
    if meant - said:
        return DROPPED_NEGATION
    if said - meant:
        return ADDED_NEGATION
    shared = frozenset.intersection(*(words(m) for m in members))
    if shared and len(shared & words(text)) / len(shared) < KEPT_WORDS:
        return DROPPED_WORDS
    return None


class ModelCanonical:
    """Writes each merge's canonical text with the model (or records why it did not); see the module."""

    def __init__(self, client: ModelClient | None, model: str, *, max_tokens: int = 600) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelCanonical:
        """The configured provider, its timeouts cut to ``consolidation.model_timeout_s`` (no client when off)."""
        provider = settings.model_provider
        if not provider.enabled:
            return cls(None, provider.model)
        from memory_core.provider.client import ModelClient, endpoint  # litellm loads only when a model writes

        left_s = settings.consolidation.model_timeout_s
        point = endpoint(provider)
        return cls(ModelClient(replace(point, timeout_s=min(point.timeout_s, left_s),
                                       total_timeout_s=min(point.total_timeout_s, left_s))), provider.model)

    def rewrite(self, merge: Merge) -> Merge:
        """``merge`` with the model's text and its provenance, or with the member's text and the reason."""
        from memory_core.provider.errors import PROVIDER_DISABLED, ProviderError

        if self.client is None:
            return replace(merge, text_by={"by": "member", "fallback": PROVIDER_DISABLED})
        texts = [m.content for m in merge.members]
        limit = 2 * max(len(t) for t in texts)

        def parse(content: Any) -> str:
            if not isinstance(content, str) or not content.strip():
                raise ProviderError(EMPTY, transient=False)
            return content.strip()

        notes = "\n".join(f"- {t}" for t in texts)
        messages = [{"role": "user", "content": PROMPT.format(chars=limit, notes=notes)}]
        try:
            text = self.client.complete(messages, max_tokens=self.max_tokens, parse=parse)
        except ProviderError as exc:
            return replace(merge, text_by={"by": "member", "fallback": exc.reason})
        why = guard(text, texts)
        if why is not None:
            return replace(merge, text_by={"by": "member", "fallback": why})
        return replace(merge, text=text, text_by={"by": "model", "model": self.model})

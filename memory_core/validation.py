"""Input validation: every check that must pass before anything is written.

Names (tenant, session, agent, channel, project) follow one pattern: printable,
no whitespace or control characters, at most 128 characters. Tenants are stricter
because they key storage: ``^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$``.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.errors import (
    ContentTooLargeError,
    EmptyContentError,
    InvalidInputError,
    InvalidTenantError,
    TenantRequiredError,
)
from memory_core.models import PROVENANCES, VISIBILITIES

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
NAME_PATTERN = re.compile(r"^[^\x00-\x20\x7f]{1,128}$")
TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
KEY_PATTERN = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")


def tenant(value: object) -> str:
    """A tenant is required and must match the pattern; anything else fails closed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise TenantRequiredError("A tenant is required on every call.")
    if not isinstance(value, str) or not TENANT_PATTERN.match(value):
        raise InvalidTenantError(
            "Tenant must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$.", tenant=str(value)[:140]
        )
    return value


def name(value: object, what: str, *, required: bool = True) -> str | None:
    """Session, agent, channel and project names: 1-128 printable chars without whitespace."""
    if value is None or value == "":
        if required:
            raise InvalidInputError(f"'{what}' is required.", field=what)
        return None
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise InvalidInputError(
            f"'{what}' must be 1-128 printable characters without whitespace.", field=what
        )
    return value


def content(value: object, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError("'content' must be a string.", field="content")
    if "\x00" in value:
        raise InvalidInputError("'content' must not contain NUL bytes.", field="content")
    if not value.strip():
        raise EmptyContentError("'content' must not be empty.", field="content")
    if len(value) > max_chars:
        raise ContentTooLargeError(
            f"'content' has {len(value)} characters; the maximum is {max_chars}.",
            field="content",
            content_len=len(value),
            max_chars=max_chars,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError("'content' must be valid Unicode (no lone surrogates).") from exc
    return value


def memory_type(value: object) -> str:
    if not isinstance(value, str) or not TYPE_PATTERN.match(value):
        raise InvalidInputError(
            "'type' must be a lowercase identifier such as turn, note, handoff, decision or error.",
            field="type",
        )
    return value


def stored_type(value: object) -> str:
    """The type of a memory being written: any memory type except ``episode``, which names the
    session summaries ``summarize_session`` writes (a memory typed so would pass for one)."""
    mtype = memory_type(value)
    if mtype == "episode":
        raise InvalidInputError(
            "'type' cannot be 'episode': episodes are session summaries written by summarize_session.",
            field="type",
        )
    return mtype


def visibility(value: object) -> str:
    if value not in VISIBILITIES:
        raise InvalidInputError("'visibility' must be 'tenant' or 'agent'.", field="visibility")
    return str(value)


def provenance(value: object, role: str | None) -> str:
    """Where the content came from (one of PROVENANCES); None: ``user`` for a user's turn, else ``agent``."""
    if value is None:
        return "user" if role == "user" else "agent"
    if value not in PROVENANCES:
        raise InvalidInputError(f"'provenance' must be one of {', '.join(sorted(PROVENANCES))}.", field="provenance")
    return str(value)


def salience(value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError("'salience' must be a number between 0 and 1.", field="salience")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInputError("'salience' must be between 0 and 1.", field="salience")
    return float(value)


def timestamp(value: object, field: str = "timestamp") -> datetime:
    """Explicit timestamps must carry a timezone; they are stored in UTC. None: now. ``field`` names the
    argument in the error (``timestamp``, ``valid_from``, ``as_of``, ...)."""
    if value is None:
        return datetime.now(UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInputError(f"'{field}' must be ISO-8601.", field=field) from exc
    if not isinstance(value, datetime):
        raise InvalidInputError(f"'{field}' must be an ISO-8601 string or datetime.", field=field)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(f"'{field}' must include a timezone (e.g. +00:00).", field=field)
    try:
        ts = value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00+14:00 leaves the calendar in UTC
        raise InvalidInputError(f"'{field}' is out of range.", field=field) from exc
    if not 1970 <= ts.year <= 9998:
        raise InvalidInputError(f"'{field}' is out of range.", field=field)
    return ts


def instant_us(value: object, field: str) -> int | None:
    """An optional instant (``as_of``, ``valid_from``, ``review_after``) in µs since the epoch; None stays None."""
    if value is None:
        return None
    return (timestamp(value, field) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def json_object(value: object, what: str, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """A small JSON object: plain JSON types, bounded size and depth, no NUL bytes."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"'{what}' must be a JSON object.", field=what)
    _check_json(value, what, max_depth, 0)
    encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    if len(encoded.encode("utf-8")) > max_bytes:
        raise InvalidInputError(f"'{what}' is larger than {max_bytes} bytes.", field=what)
    return json.loads(encoded)


def _check_json(value: object, what: str, max_depth: int, depth: int) -> None:
    if depth > max_depth:
        raise InvalidInputError(f"'{what}' is nested deeper than {max_depth} levels.", field=what)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or "\x00" in key:
                raise InvalidInputError(f"'{what}' keys must be strings without NUL.", field=what)
            _check_json(item, what, max_depth, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, what, max_depth, depth + 1)
    elif isinstance(value, str):
        if "\x00" in value:
            raise InvalidInputError(f"'{what}' must not contain NUL bytes.", field=what)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(f"'{what}' must be valid Unicode.", field=what) from exc
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"'{what}' must hold finite numbers only.", field=what)
    elif value is not None and not isinstance(value, bool | int):
        raise InvalidInputError(f"'{what}' must hold JSON values only.", field=what)


def source(value: object, max_bytes: int, max_depth: int) -> dict[str, Any]:
    src = json_object(value, "source", max_bytes, max_depth)
    if "id" in src and (not isinstance(src["id"], str) or not KEY_PATTERN.match(src["id"])):
        raise InvalidInputError("'source.id' must be a non-empty string of printable characters.")
    return src


def idempotency_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not KEY_PATTERN.match(value):
        raise InvalidInputError("'idempotency_key' must be 1-256 printable characters.", field="idempotency_key")
    return value


def project_id(value: object) -> str | None:
    """Stored project: None or '' is the global pool."""
    if value is None or value == "":
        return None
    return name(value, "project_id")

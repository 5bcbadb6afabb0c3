"""Secrets never stored in clear: detection (:mod:`.detect`, with :mod:`.formats` for credentials as tools
print them, :mod:`.encoded` for base64 and hex, :mod:`.views` for the text as a person reads it and
:mod:`.values` for which values are secrets), the write-time policy (:mod:`.guard`) (doctor finds and
redacts secrets stored before the guard existed: :mod:`memory_core.operator.doctor.secrets`)."""

from memory_core.secret_guard.detect import detect, redact
from memory_core.secret_guard.findings import Finding, marker
from memory_core.secret_guard.guard import POLICIES, Policy, Scan, SecretGuard

__all__ = ["POLICIES", "Finding", "Policy", "Scan", "SecretGuard", "detect", "marker", "redact"]

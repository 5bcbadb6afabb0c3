"""Settings: defaults, an optional TOML file, then ``MEMORY_CORE_<SECTION>_<KEY>`` env vars.

Only the composition root (``MemoryCore.open`` / the servers) calls :func:`load_settings`;
nothing reads configuration at import time. Bad values fail with the key and the reason.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_core.errors import ConfigError
from memory_core.validation import NAME_PATTERN

ENV_PREFIX = "MEMORY_CORE_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StorageSettings(_Section):
    data_dir: str = ".memory-core"
    chroma: Literal["embedded", "http"] = "embedded"
    chroma_host: str = "127.0.0.1"
    chroma_port: int = Field(8000, ge=1, le=65535)
    chroma_ssl: bool = False
    chroma_auth_header: str | None = None
    chroma_auth_token_env: str | None = None
    chroma_retries: int = Field(3, ge=0, le=20)
    collection_prefix: str = Field("mc", pattern=r"^[a-z][a-z0-9]{0,15}$")
    vector_deadline_s: float = Field(30.0, gt=0, le=3600)


class EmbeddingSettings(_Section):
    provider: Literal["minilm", "hash", "litellm"] = "minilm"
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    batch_size: int = Field(32, ge=1, le=1024)
    dimension: int = Field(64, ge=8, le=4096)


class LimitSettings(_Section):
    max_content_chars: int = Field(100_000, ge=1)
    max_metadata_bytes: int = Field(16_384, ge=2)
    max_metadata_depth: int = Field(8, ge=1, le=64)
    duplicate_window_s: float = Field(600.0, ge=0)
    max_batch: int = Field(1000, ge=1)


class RecallSettings(_Section):
    preview_chars: int = Field(500, ge=0)
    full_content_budget_chars: int = Field(200_000, ge=1)
    scan_window: int = Field(500, ge=10)
    default_limit: int = Field(10, ge=1)
    preset: str = "balanced"
    recency_weight: float = Field(0.2, ge=0, le=1)
    recency_half_life_days: float = Field(30.0, gt=0)
    type_recency_weight: float = Field(0.5, ge=0, le=1)
    type_recency_half_life_days: float = Field(7.0, gt=0)
    quality_gate: float | None = Field(None, ge=0, le=1)


class RecoverSettings(_Section):
    turns: int = Field(20, ge=1, le=100)
    turn_preview_chars: int = Field(200, ge=0)
    turns_budget_chars: int = Field(5000, ge=400)
    summary_wait_s: float = Field(2.0, ge=0)


def _agent_name(value: str | None) -> str | None:
    if value is not None and not NAME_PATTERN.match(value):
        raise ValueError("an agent id is 1-128 printable characters without whitespace")
    return value


class TokenBinding(_Section):
    """What one bearer token binds: a tenant and, optionally, the one agent it acts as."""

    tenant: str
    agent: str | None = None

    _check_agent = field_validator("agent")(_agent_name)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    tenant: str | None = None
    agent: str | None = None
    # sha256(token) -> "tenant" or {tenant = "...", agent = "..."}; a plain string binds the tenant only
    tokens: dict[str, TokenBinding] = Field(default_factory=dict)
    mcp_limit_cap: int = Field(50, ge=1)
    operator_token_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    max_inflight_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    # stdio launches share one background HTTP server per data directory; it stops after this long unused
    shared_idle_s: float = Field(300.0, gt=0, le=86_400)

    _check_agent = field_validator("agent")(_agent_name)

    @field_validator("tokens", mode="before")
    @classmethod
    def _tenant_only_tokens(cls, value: object) -> object:
        """The original form ``"<sha256>" = "tenant"`` stays valid: it binds no agent."""
        if isinstance(value, Mapping):
            return {k: {"tenant": b} if isinstance(b, str) else b for k, b in value.items()}
        return value


class OperatingContextSettings(_Section):
    agents: dict[str, str] = Field(default_factory=dict)


class ModelProviderSettingsModel(_Section):
    enabled: bool = False
    model: str = "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    max_input_chars: int = Field(12_000, ge=100)
    max_summary_chars: int = Field(280, ge=20)
    total_timeout_s: float = Field(30.0, gt=0)


class Settings(_Section):
    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    recover: RecoverSettings = Field(default_factory=RecoverSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    operating_context: OperatingContextSettings = Field(default_factory=OperatingContextSettings)
    model_provider: ModelProviderSettingsModel = Field(default_factory=ModelProviderSettingsModel)


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Map ``MEMORY_CORE_RECALL_PREVIEW_CHARS=0`` to ``{"recall": {"preview_chars": "0"}}``.

    Section names may contain underscores (``model_provider``), so match known sections
    longest first. Dict-valued keys take JSON. Unknown variables under the prefix fail.
    """
    sections = sorted(Settings.model_fields, key=len, reverse=True)
    out: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _NON_SETTING_ENV or name.startswith(_TEST_ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section = next((s for s in sections if rest.startswith(s + "_")), None)
        if section is None:
            raise ConfigError(f"{name}: no such setting section.", key=name)
        key = rest[len(section) + 1 :]
        model = Settings.model_fields[section].annotation
        fields = model.model_fields  # type: ignore[union-attr]
        if key not in fields:
            raise ConfigError(f"{name}: no such setting '{section}.{key}'.", key=name)
        value: Any = raw
        if "dict" in str(fields[key].annotation):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{name}: expected a JSON object ({exc.msg}).", key=name) from exc
        elif raw == "" and "None" in str(fields[key].annotation):
            value = None
        out.setdefault(section, {})[key] = value
    return out


# Variables that share the prefix but are not settings (test-suite switches among them).
_TEST_ENV_PREFIX = "MEMORY_CORE_TEST_"
_NON_SETTING_ENV = frozenset({"MEMORY_CORE_CONFIG", "MEMORY_CORE_RELIABILITY", "MEMORY_CORE_TENANT",
                              "MEMORY_CORE_AGENT"})


def _bound_agent_env(env: Mapping[str, str]) -> str | None:
    """``MEMORY_CORE_AGENT``: the agent a stdio server binds; set but malformed (even empty) fails."""
    raw = env.get("MEMORY_CORE_AGENT")
    if raw is None:
        return None
    if not NAME_PATTERN.match(raw):
        raise ConfigError(
            "MEMORY_CORE_AGENT must be an agent id: 1-128 printable characters without whitespace "
            "(unset it to bind no agent).",
            key="MEMORY_CORE_AGENT",
        )
    return raw


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults ← TOML file (``path`` or ``$MEMORY_CORE_CONFIG``) ← env vars ← ``overrides``."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    path = path or env.get("MEMORY_CORE_CONFIG")
    if path:
        file = Path(path)
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"Config file {file} does not exist.", key="config") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"Config file {file} is not valid TOML: {exc}.", key="config") from exc
    data = _merge(data, _env_overrides(env))
    if env.get("MEMORY_CORE_TENANT"):
        data = _merge(data, {"server": {"tenant": env["MEMORY_CORE_TENANT"]}})
    agent = _bound_agent_env(env)
    if agent is not None:
        data = _merge(data, {"server": {"agent": agent}})
    if overrides:
        data = _merge(data, overrides)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"Invalid setting '{key}': {first['msg']}.", key=key) from exc

"""How settings are layered, through pydantic-settings: highest first,

1. ``overrides`` (the CLI's flags),
2. ``MEMORY_CORE_TENANT`` / ``MEMORY_CORE_AGENT`` / ``MEMORY_CORE_SCOPE`` (the server's binding),
3. ``MEMORY_CORE_<SECTION>_<KEY>`` variables (``env_prefix="MEMORY_CORE_"``; the section is
   the nested model, the rest of the name its key, so keys keep their underscores:
   ``MEMORY_CORE_MODEL_PROVIDER_TIMEOUT_S`` -> ``model_provider.timeout_s``; dict keys take JSON),
4. the TOML file (``path`` or ``$MEMORY_CORE_CONFIG``),
5. the defaults of :mod:`memory_core.settings.schema`.

Imported by :func:`memory_core.settings.load_settings` only: pydantic-settings costs ~70-90 ms
to import, which a command that never loads settings (``--help``) should not pay.

Errors are ``ConfigError`` (CONFIG_INVALID) naming the key: an unknown ``MEMORY_CORE_*``
variable (with the variable it probably meant), a malformed binding variable, a missing or
invalid file, a value that fails validation.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from memory_core.errors import ConfigError
from memory_core.scopes import SCOPE_NAMES, parse_scope
from memory_core.settings.schema import Settings
from memory_core.validation import NAME_PATTERN, TENANT_PATTERN

ENV_PREFIX = "MEMORY_CORE_"
# Variables that share the prefix but are not settings (test-suite switches among them).
TEST_ENV_PREFIX = "MEMORY_CORE_TEST_"
NON_SETTING_ENV = frozenset({"MEMORY_CORE_CONFIG", "MEMORY_CORE_RELIABILITY"})
BINDING_ENV = {"MEMORY_CORE_TENANT": "tenant", "MEMORY_CORE_AGENT": "agent",
               "MEMORY_CORE_SCOPE": "scope"}  # -> server.<key>

class LayeredSettings(BaseSettings, Settings):
    """:class:`Settings` as a ``BaseSettings``: the sources below fill it, nested per section."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="_",
        env_nested_max_split=1,  # split once, after the section: keys keep their underscores
        env_parse_none_str="",  # an empty variable unsets an optional setting
        case_sensitive=False,
        extra="forbid",
    )


def setting_variables() -> dict[str, str]:
    """Every settings variable and its setting: ``MEMORY_CORE_RECALL_PREVIEW_CHARS`` -> ``recall.preview_chars``."""
    out: dict[str, str] = {}
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for key in model.model_fields:
            out[f"{ENV_PREFIX}{section}_{key}".upper()] = f"{section}.{key}"
    return out


def _suggestion(name: str, known: Mapping[str, str]) -> str:
    """``; did you mean MEMORY_CORE_STORAGE_DATA_DIR?`` for a near miss, else nothing."""
    rest = name[len(ENV_PREFIX) :]
    same_key = [var for var, setting in known.items() if setting.split(".", 1)[1].upper() == rest]
    close = same_key or difflib.get_close_matches(name, [*known, *BINDING_ENV], n=1, cutoff=0.8)
    return f"; did you mean {close[0]}?" if close else ""


class SectionEnvSource(EnvSettingsSource):
    """``MEMORY_CORE_<SECTION>_<KEY>`` from the given environment; an unknown name fails."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {
            name: value
            for name, value in environ.items()
            if name.upper().startswith(ENV_PREFIX)
            and name.upper() not in NON_SETTING_ENV | BINDING_ENV.keys()
            and not name.upper().startswith(TEST_ENV_PREFIX)
        }
        self._check_names()
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # case-insensitive, as the settings are; an empty value unsets (env_parse_none_str)
        return {name.lower(): (None if value == "" else value) for name, value in self._environ.items()}

    def _check_names(self) -> None:
        known = setting_variables()
        for name, value in self._environ.items():
            setting = known.get(name.upper())
            if setting is None:
                raise ConfigError(f"{name}: no such setting{_suggestion(name.upper(), known)}", key=name)
            if value and _is_dict_setting(setting):
                try:
                    json.loads(value)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{name}: expected a JSON object ({exc.msg}).", key=name) from exc


def _is_dict_setting(setting: str) -> bool:
    section, key = setting.split(".", 1)
    model = Settings.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return "dict" in str(model.model_fields[key].annotation)


class BindingEnvSource(PydanticBaseSettingsSource):
    """``MEMORY_CORE_TENANT`` / ``MEMORY_CORE_AGENT`` / ``MEMORY_CORE_SCOPE``: the tenant, agent and
    access scope a server binds.

    Set but malformed, each fails at start; an empty ``MEMORY_CORE_TENANT`` binds none (as it
    always did), an empty ``MEMORY_CORE_AGENT`` or ``MEMORY_CORE_SCOPE`` is malformed.
    """

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._server: dict[str, str] = {}
        tenant, agent = environ.get("MEMORY_CORE_TENANT"), environ.get("MEMORY_CORE_AGENT")
        if tenant:
            if not TENANT_PATTERN.match(tenant):
                raise ConfigError(
                    "MEMORY_CORE_TENANT must be a tenant name: 1-128 of A-Z a-z 0-9 _ . : @ -, starting with "
                    "a letter or digit (unset it to bind no tenant).",
                    key="MEMORY_CORE_TENANT",
                )
            self._server["tenant"] = tenant
        if agent is not None:
            if not NAME_PATTERN.match(agent):
                raise ConfigError(
                    "MEMORY_CORE_AGENT must be an agent id: 1-128 printable characters without whitespace "
                    "(unset it to bind no agent).",
                    key="MEMORY_CORE_AGENT",
                )
            self._server["agent"] = agent
        scope = environ.get("MEMORY_CORE_SCOPE")
        if scope is not None:
            if parse_scope(scope) is None:
                raise ConfigError(
                    f"MEMORY_CORE_SCOPE must be one of {', '.join(SCOPE_NAMES)} (unset it for the default, "
                    "write).",
                    key="MEMORY_CORE_SCOPE",
                )
            self._server["scope"] = scope

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return (self._server if field_name == "server" and self._server else None), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {"server": dict(self._server)} if self._server else {}


def _toml_source(path: str | os.PathLike[str] | None) -> PydanticBaseSettingsSource | None:
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"Config file {file} does not exist.", key="config")
    try:
        return TomlConfigSettingsSource(LayeredSettings, toml_file=file)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Config file {file} is not valid TOML: {exc}.", key="config") from exc


def layered_settings(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str], overrides: Mapping[str, Any]
) -> Settings:
    """The settings from every layer (see the module docstring), validated once."""
    toml = _toml_source(path or environ.get("MEMORY_CORE_CONFIG"))
    sources: tuple[PydanticBaseSettingsSource, ...] = (
        InitSettingsSource(LayeredSettings, init_kwargs=dict(overrides)),
        BindingEnvSource(LayeredSettings, environ),
        SectionEnvSource(LayeredSettings, environ),
        *([toml] if toml is not None else []),
    )
    try:
        layered = LayeredSettings(_build_sources=(sources, {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"Invalid setting '{key}': {first['msg']}.", key=key) from exc
    return Settings.model_validate(layered.model_dump())

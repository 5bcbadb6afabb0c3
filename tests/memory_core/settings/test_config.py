"""Settings: defaults, TOML file, environment overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.errors import ConfigError
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings, TokenBinding
from testbed.paths import ROOT


def test_defaults_hold_without_a_file_or_environment() -> None:
    s = load_settings(environ={})
    assert s.recall.preview_chars == 500 and s.recall.full_content_budget_chars == 200_000
    assert s.storage.data_dir == ".memory-core" and s.storage.chroma == "embedded"
    assert s.limits.max_content_chars == 100_000 and s.server.host == "127.0.0.1"


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[recall]\npreview_chars = 300\n[model_provider]\ntimeout_s = 2.5\n")
    s = load_settings(cfg, environ={"MEMORY_CORE_RECALL_PREVIEW_CHARS": "0"})
    assert s.recall.preview_chars == 0 and s.model_provider.timeout_s == 2.5
    s = load_settings(environ={"MEMORY_CORE_MODEL_PROVIDER_ENABLED": "true",
                               "MEMORY_CORE_SERVER_TOKENS": '{"abc": "acme"}'})
    assert s.model_provider.enabled and s.server.tokens == {"abc": TokenBinding(tenant="acme")}
    assert load_settings(environ={"MEMORY_CORE_EMBEDDING_THREADS": "1"}).embedding.threads == 1


@pytest.mark.parametrize(
    ("environ", "key"),
    [({"MEMORY_CORE_RECALL_PREVIEW_CHARS": "-1"}, "recall.preview_chars"),
     ({"MEMORY_CORE_RECALL_PREVIEW_CHARS": "lots"}, "recall.preview_chars"),
     ({"MEMORY_CORE_STORAGE_CHROMA": "cloud"}, "storage.chroma"),
     ({"MEMORY_CORE_EMBEDDING_THREADS": "0"}, "embedding.threads"),
     ({"MEMORY_CORE_NOPE_X": "1"}, "MEMORY_CORE_NOPE_X"),
     ({"MEMORY_CORE_RECALL_NOPE": "1"}, "MEMORY_CORE_RECALL_NOPE"),
     ({"MEMORY_CORE_SERVER_TOKENS": "{not json"}, "MEMORY_CORE_SERVER_TOKENS")],
)
def test_bad_values_fail_with_the_key_and_the_reason(environ: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ=environ)
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == key
    assert key in err.value.message


def test_unknown_keys_in_the_file_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[recall]\npreview_chrs = 3\n")
    with pytest.raises(ConfigError, match=r"recall\.preview_chrs"):
        load_settings(cfg, environ={})


def test_template_lists_every_setting_with_its_default() -> None:
    text = (ROOT / "config.template.toml").read_text()
    template = load_settings(ROOT / "config.template.toml", environ={})
    assert template == Settings()
    for section, model in Settings.model_fields.items():
        assert f"[{section}]" in text or f"[{section}." in text
        for key in model.annotation.model_fields:  # type: ignore[union-attr]
            present = f"{key} =" in text or f"[{section}.{key}]" in text
            assert present, f"{section}.{key} missing from template"

"""The operator's read-only web inspector, served at ``/ui`` (see :mod:`tools.ui.app`)."""

from tools.ui.app import build_ui_app, standalone_app

UI_PATH = "/ui"

__all__ = ["UI_PATH", "build_ui_app", "standalone_app"]

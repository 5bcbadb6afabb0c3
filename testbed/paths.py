"""Where the project is, for tests that run its code in subprocesses or read its files."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: memory_core/, graph/, tools/, tests/

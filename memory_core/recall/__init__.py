"""Hybrid recall: filters, lexical retrievers, presets and the ranking engine."""

from memory_core.recall.filters import UNSET
from memory_core.recall.presets import PRESETS, RecallConfig

__all__ = ["PRESETS", "UNSET", "RecallConfig"]

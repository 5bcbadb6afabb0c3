"""Recall's candidate branches: vector, lexical, entity and dated."""

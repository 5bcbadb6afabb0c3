"""Entities: what memories are about (declared by writers, extracted from text, merged by operators)."""

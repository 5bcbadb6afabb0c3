"""Entities: the extractor, its overlap with declared entities, and the entity branch of recall."""

"""Operator reads and maintenance: stats, the inspector's views, doctor, export and import."""

"""The write path: adds and deletes that keep Chroma and the graph in agreement."""

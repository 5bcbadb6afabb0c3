"""What memories are about: entities, their extraction and their graph."""

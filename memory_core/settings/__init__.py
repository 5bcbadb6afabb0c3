"""Settings: defaults, an optional TOML file, then environment variables."""

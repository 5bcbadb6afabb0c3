"""Settings: defaults, an optional TOML file, then environment variables (:mod:`.schema`, :mod:`.sources`).

``config.template.toml`` beside this module is the one template: every setting with its default
and a one-line comment (``memory-core init`` writes it; the checkout's top-level
``config.template.toml`` is a link to it).
"""

from importlib import resources

TEMPLATE = "config.template.toml"


def template_text() -> str:
    """The commented configuration template."""
    return resources.files(__name__).joinpath(TEMPLATE).read_text(encoding="utf-8")

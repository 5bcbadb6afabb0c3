"""``python -m tools.cli``: the ``memory-core`` command without the installed script."""

from tools.cli.app import main

main()

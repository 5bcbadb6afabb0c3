"""``python -m memory_core``: the ``memory-core`` command, safe from same-named packages (see
:mod:`memory_core.launcher`)."""

from memory_core.launcher import drop_working_directory, main

drop_working_directory()
main()

"""What the tests and the benchmarks both stand up: throwaway PostgreSQL (``postgres``) and Chroma
(``chroma_server``) servers, MCP servers and clients over stdio and HTTP (``mcp_harness``,
``mcp_in_process``), child processes stopped cleanly (``processes``), the secrets corpus
(``secrets_corpus``) and where the checkout is (``paths``).

Imports go one way: ``tests`` import ``bench`` (to test it) and ``testbed``; ``bench`` imports
``testbed`` and never ``tests``; ``testbed`` imports neither (``tests/test_architecture.py``).
Not part of the installed package.
"""

"""The HTTP front door: listening sockets, Host/Origin checks and body budgets."""

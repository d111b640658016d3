"""Public ops, one folder per family: validate -> dispatch -> kernel or reference."""

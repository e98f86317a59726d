"""Local fake servers for tests and benchmarks (not part of the specselect package)."""

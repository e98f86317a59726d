"""specselect._runner."""

"""specselect.engines."""

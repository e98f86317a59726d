"""specselect.runner."""

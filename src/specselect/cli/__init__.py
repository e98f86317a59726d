"""specselect.cli."""

"""specselect._cli."""

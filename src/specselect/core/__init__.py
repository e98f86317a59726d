"""specselect.core."""

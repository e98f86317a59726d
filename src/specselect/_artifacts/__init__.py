"""specselect._artifacts."""

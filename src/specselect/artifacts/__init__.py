"""specselect.artifacts."""

"""specselect.evidence."""

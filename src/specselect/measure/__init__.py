"""specselect.measure."""

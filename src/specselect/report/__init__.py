"""specselect.report."""

"""specselect.plan."""

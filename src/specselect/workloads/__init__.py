"""specselect.workloads."""

"""Running a plan's groups over a cluster: blocks of launches leased from Ray, each on one node."""

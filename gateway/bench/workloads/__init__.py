"""Bench workloads: the shared files by path, or seeded generated ones of the same shape."""

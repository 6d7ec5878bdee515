"""bench stats: the stats queries over a large seeded request log."""

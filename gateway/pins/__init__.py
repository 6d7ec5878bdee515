"""Pinned static prefixes: a tenant's hot prefixes held in the engine's cache."""

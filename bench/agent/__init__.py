"""bench agent: agent traffic through a real gateway, raw order vs canonicalized."""

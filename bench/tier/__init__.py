"""bench tier: the host KV tier against a device cache too small for the agent workload's prefixes."""

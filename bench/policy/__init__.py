"""bench policy: agent traffic under a small KV budget, per waiting-queue policy."""

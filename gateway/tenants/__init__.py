"""Tenants: the service under the admin API and CLI, key authentication cache, dynamic-content rules."""

"""Backends (embedded engine, remote engines via litellm) and the router that picks one per request."""

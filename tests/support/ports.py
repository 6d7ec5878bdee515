"""A free loopback port for test servers, without importing the bench (bench/server.py keeps its own)."""

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it; a race with other binders remains)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

"""A throwaway `redis-server` on a free loopback port, for tests that stop and restart Redis.

Never the machine's own Redis (6379): each RedisServer binds 127.0.0.1 on a port the OS picked,
keeps nothing on disk (no RDB, no AOF), and is a child of the test, so stopping it harms
nothing else. `stop` then `start` brings it back on the same port, empty (as a restarted Redis
without persistence is).

    with RedisServer() as redis_server:
        redis_server.url        # redis://127.0.0.1:<port>/0
        redis_server.stop(); redis_server.start()
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from tests.support.ports import free_port

REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed")
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.TemporaryDirectory(prefix="radixgate-redis-")
        self._process: subprocess.Popen | None = None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 20.0) -> RedisServer:
        log_path = Path(self._dir.name) / "redis.log"
        self._process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self._dir.name, "--logfile", str(log_path), "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        client = self.client()
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self._process.returncode}: "
                                       f"{log_path.read_text() if log_path.exists() else ''}")
                try:
                    if client.ping():
                        return self
                except redis.ConnectionError:
                    time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise TimeoutError(f"redis-server on port {self.port} did not answer within {timeout_s} s")

    def stop(self) -> None:
        """SIGTERM and wait: the port is free again (and the data gone) when this returns."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def client(self) -> redis.Redis:
        """A synchronous client, for a test to look at what the gateway wrote."""
        return redis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
        self._dir.cleanup()

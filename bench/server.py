"""A throwaway `radixgate serve` process on a free loopback port, for benchmarks and end-to-end tests."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from gateway.cli.serve import stop_process

DEFAULT_START_TIMEOUT_S = 600.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`radixgate serve` in a child process with its own SQLite database and admin key.

    Use as a context manager: entering starts the server and waits for /healthz; leaving stops it.
    `env` adds RADIXGATE_* settings (e.g. {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": "65536"}).
    `command` replaces the default launcher (this interpreter running gateway.cli), e.g. the installed
    `radixgate` console script; `serve` and then `args` (e.g. ["--no-engine"]) are appended either way.
    `stop` then `start` again restarts it on the same port, database and admin key; `kill` is SIGKILL.
    """

    def __init__(
        self, *, env: dict[str, str] | None = None, workdir: str | Path | None = None,
        command: Sequence[str] | None = None, args: Sequence[str] = (),
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="radixgate-server-") if workdir is None else None
        self.workdir = Path(workdir or self._tmp.name)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_key = "sk-rgadmin-" + secrets.token_urlsafe(24)
        self.log_path = self.workdir / "server.log"
        self.env = {
            **os.environ,
            "RADIXGATE_ADMIN_KEY": self.admin_key,
            "RADIXGATE_DB_URL": f"sqlite:///{self.workdir / 'radixgate.db'}",
            "RADIXGATE_HOST": "127.0.0.1",
            "RADIXGATE_PORT": str(self.port),
            **(env or {}),
        }
        self.command = list(command or [sys.executable, "-c", "from gateway.cli import app; app()"]) + ["serve", *args]
        self._process: subprocess.Popen | None = None

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> ServerProcess:
        with open(self.log_path, "a") as log_file:
            self._process = subprocess.Popen(
                self.command, env=self.env, cwd=self.workdir, stdout=log_file, stderr=subprocess.STDOUT
            )
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the server exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"the server did not answer /healthz within {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, num_chars: int = 4000) -> str:
        return self.log_path.read_text()[-num_chars:] if self.log_path.exists() else ""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def send_signal(self, signum: int) -> None:
        """Send `signum` (SIGKILL for a crash, SIGTERM for a graceful stop) without waiting."""
        self._process.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        """The exit status once the process ends (raises subprocess.TimeoutExpired past `timeout_s`)."""
        return self._process.wait(timeout=timeout_s)

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, timeout_s=30)
        self._process = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (no drain, no lifespan shutdown)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

"""Runs `python -m broker_emulator serve` as a subprocess for CLI, durability and crash tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time


def serve_command(*args: str) -> list[str]:
    """`python -m broker_emulator serve` on free ports (gRPC, name server, remoting) with `args`."""
    ports = ("--port", "0", "--namesrv-port", "0", "--remoting-port", "0")
    return [sys.executable, "-m", "broker_emulator", "serve", *ports, *args]


class EmulatorProcess:
    """A `serve` subprocess; `endpoints` and `name_server` are parsed from its output. Always stopped by
    `stop()`/`kill()`."""

    def __init__(self, *args: str, timeout: float = 30.0) -> None:
        self.cmd = serve_command("--log-level", "WARNING", *args)
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ}
        )
        self.lines: list[str] = []
        self.endpoints = ""
        self.name_server = ""
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                ns = re.match(r"name server: (\S+)", line)
                if ns:
                    self.name_server = ns.group(1)
                m = re.match(r"endpoints: (\S+)", line)
                if m:
                    self.endpoints = m.group(1)
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(timeout) or not self.endpoints:
            self.kill()
            raise RuntimeError(f"emulator did not start: {self.output}")

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        """SIGKILL: no flush, no cleanup (the crash being tested)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._pump.join(5)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: the clean shutdown path; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._pump.join(5)
        return self.proc.returncode


def wait_for(predicate, timeout: float, interval: float = 0.05, message: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {message}")


def run_admin(endpoints: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker_emulator", "admin", "--endpoints", endpoints, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )

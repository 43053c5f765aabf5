"""Small durable key/value tables (topics, consumer offsets, POP state): a JSON snapshot plus an append journal.

Each update is one line written to the OS before the call returns, so it survives `kill -9`; the
journal is folded into the snapshot at open and close.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)


class JournaledTable:
    """dict[str, Any] persisted under `directory/name.json` + `name.journal`; in memory when directory is None."""

    def __init__(self, directory: str | None, name: str) -> None:
        self.data: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._snapshot = self._journal = ""
        if directory is None:
            return
        os.makedirs(directory, exist_ok=True)
        self._snapshot = os.path.join(directory, f"{name}.json")
        self._journal = os.path.join(directory, f"{name}.journal")
        if os.path.exists(self._snapshot):
            with open(self._snapshot, encoding="utf-8") as f:
                self.data = json.load(f)
        if os.path.exists(self._journal):
            with open(self._journal, encoding="utf-8") as f:
                for line in f:
                    try:
                        op, key, value = json.loads(line)
                    except (ValueError, TypeError):
                        log.warning("%s: skipping a torn journal line", self._journal)
                        continue
                    if op == "set":
                        self.data[key] = value
                    else:
                        self.data.pop(key, None)
        self._compact()
        self._fd = os.open(self._journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _compact(self) -> None:
        tmp = self._snapshot + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._snapshot)
        with open(self._journal, "w", encoding="utf-8"):
            pass

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self.data[key] = value
            if self._fd is not None:
                os.write(self._fd, (json.dumps(["set", key, value]) + "\n").encode("utf-8"))

    def delete(self, key: str) -> None:
        with self._lock:
            if self.data.pop(key, None) is not None and self._fd is not None:
                os.write(self._fd, (json.dumps(["del", key, None]) + "\n").encode("utf-8"))

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self._compact()

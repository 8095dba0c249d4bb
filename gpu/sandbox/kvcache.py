"""The key-value cache the sandbox keeps baselines and hardware ceilings in.

Any object with `async get(key) -> dict | None` and `async put(key, dict)` will do (the store
provides one backed by its database). The default is one JSON file, written atomically.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Protocol


class KVCache(Protocol):
    async def get(self, key: str) -> dict[str, Any] | None: ...

    async def put(self, key: str, value: dict[str, Any]) -> None: ...


class JsonFileCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, dict[str, Any]] | None = None
        self._lock = asyncio.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._data is None:
            try:
                self._data = json.loads(self.path.read_text())
            except FileNotFoundError:
                self._data = {}
            except ValueError:
                # a damaged cache only costs re-measurement; keep the bad file for inspection
                self.path.replace(self.path.with_suffix(".corrupt"))
                self._data = {}
        return self._data

    async def get(self, key: str) -> dict[str, Any] | None:
        async with self._lock:
            return self._load().get(key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        async with self._lock:
            data = self._load()
            data[key] = value
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(self.path)

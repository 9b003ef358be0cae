"""A small typed client for Toxiproxy's REST API (one instance per node).

Why not ``toxiproxy-python``: it keeps the server's host and port in
class-level globals, so one process talks to one server, while this project
runs one Toxiproxy server per Kafka node (so that each link "node j -> node i"
is a proxy of its own on node j); it also has not changed since 2019. The
REST API we need is five calls, so a stdlib (urllib) client is smaller than a
dependency and has no global state.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Literal

from pytest_elr.sut.errors import ToxiproxyError

Stream = Literal["upstream", "downstream"]


@dataclass(frozen=True)
class ProxySpec:
    name: str
    listen: str
    upstream: str
    enabled: bool = True


class ToxiproxyClient:
    """Client of one Toxiproxy server, e.g. ``ToxiproxyClient("127.0.0.1", 32768)``."""

    # Removing a toxic hands on what it holds first (up to 2 s per connection in our server).
    def __init__(self, host: str, port: int, timeout_s: float = 15.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise ToxiproxyError(f"{method} {self.base}{path}: HTTP {e.code}: {detail}") from e
        except OSError as e:
            raise ToxiproxyError(f"{method} {self.base}{path}: {e}") from e
        return json.loads(raw) if raw.strip() else None

    def version(self) -> str:
        req = urllib.request.Request(self.base + "/version")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.read().decode().strip()
        except OSError as e:
            raise ToxiproxyError(f"GET {self.base}/version: {e}") from e

    def populate(self, proxies: list[ProxySpec]) -> None:
        """Create (or replace) proxies in one call."""
        self._call("POST", "/populate", [p.__dict__ for p in proxies])

    def proxies(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/proxies")
        return result

    def add_toxic(self, proxy: str, name: str, type_: str, stream: Stream,
                  attributes: dict[str, int | float], toxicity: float = 1.0) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", {
            "name": name, "type": type_, "stream": stream,
            "toxicity": toxicity, "attributes": attributes,
        })

    def remove_toxic(self, proxy: str, name: str, missing_ok: bool = True) -> None:
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")
        except ToxiproxyError as e:
            if not (missing_ok and "HTTP 404" in str(e)):
                raise

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", f"/proxies/{proxy}/toxics")
        return result

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._call("POST", "/reset")

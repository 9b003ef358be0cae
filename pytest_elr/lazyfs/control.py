"""Control socket: one JSON request line in, one JSON reply line out.

Requests: ``{"cmd": "ping" | "stats" | "power_off" | "sync" | "unmount"}``.
Replies: ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``.
A unix socket (not a file in the mount) so that a harness in another process or
container (``docker exec``) can drive it while the application is down.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client side needs neither trio nor pyfuse3
    import trio

Handler = Callable[[str], Awaitable[dict[str, Any]]]
MAX_REQUEST = 64 * 1024


def default_path(backing: str) -> str:
    return os.path.join(os.path.abspath(backing), ".lazyfs", "control.sock")


async def serve(path: str, handler: Handler, *, task_status: trio.TaskStatus[None]) -> None:
    import trio

    if os.path.exists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(16)
    task_status.started()
    try:
        await trio.serve_listeners(partial(_serve_one, handler), [trio.SocketListener(sock)])
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


async def _serve_one(handler: Handler, stream: trio.SocketStream) -> None:
    async with stream:
        buf = b""
        while b"\n" not in buf and len(buf) < MAX_REQUEST:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            buf += chunk
        try:
            cmd = json.loads(buf.decode())["cmd"]
            reply = {"ok": True, **await handler(cmd)}
        except Exception as e:  # reported to the client, never kills the layer
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        await stream.send_all(json.dumps(reply).encode() + b"\n")


def request(path: str, cmd: str, timeout: float = 60.0) -> dict[str, Any]:
    """Send one command to a running layer (blocking); raises on error replies."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    reply = json.loads(buf.decode())
    if not reply.get("ok"):
        raise RuntimeError(f"lazyfs {cmd}: {reply.get('error')}")
    return reply

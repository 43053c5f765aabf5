"""Reading whole messages from a socket, for the benchmarks' plain-TCP servers and their clients."""

from __future__ import annotations

import socket


def read_into(sock: socket.socket, view: memoryview) -> None:
    """Fills `view` from `sock`; a connection closed before it is full is a ConnectionError."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError(f"the server closed the connection after {got} of {len(view)} bytes")
        got += n


def read_exact(sock: socket.socket, size: int) -> bytearray:
    """The next `size` bytes of `sock`, in one buffer."""
    buf = bytearray(size)
    read_into(sock, memoryview(buf))
    return buf

"""Length-prefixed frames over a stream socket: how the server talks to its solver processes.

A frame is an 8-byte big-endian length followed by that many bytes, of any size. The worker's
end is a blocking socket (``send_frame``, ``recv_frame``: loops until every byte has gone or
come). The server's end is non-blocking and driven by the event loop (``Channel``): a frame
to send is queued and written as the socket accepts it, never blocking the loop; what each
read brings is gathered into the frame it belongs to, however the bytes are split. Nothing
here depends on which event loop runs (asyncio's or uvloop's): the channel sets its socket
non-blocking itself and treats a full or empty socket as the normal case.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import deque
from collections.abc import Callable

__all__ = ["MAX_FRAME", "Channel", "recv_frame", "send_frame"]

HEADER = struct.Struct(">Q")  # the length of the frame that follows
MAX_FRAME = 1 << 33  # bytes: a longer length means a corrupt stream, not a frame
SMALL_FRAME = 1 << 16  # bytes: a frame this small goes out with its header in one write
READ_PER_CALL = 4 << 20  # bytes one readable callback takes at most, so others get a turn


def send_frame(sock: socket.socket, data: bytes) -> None:
    """Send one frame on a blocking socket; ``OSError`` if the other end is gone."""
    if len(data) <= SMALL_FRAME:
        sock.sendall(HEADER.pack(len(data)) + data)
    else:
        sock.sendall(HEADER.pack(len(data)))
        sock.sendall(data)


def recv_frame(sock: socket.socket) -> bytearray:
    """The next frame from a blocking socket; ``EOFError`` if it closes first."""
    (size,) = HEADER.unpack(_recv_exactly(sock, HEADER.size))
    if size > MAX_FRAME:
        raise EOFError(f"a frame of {size} bytes: the stream is corrupt")
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError(f"the socket closed after {got} of {size} bytes")
        got += n
    return data


class Channel:
    """The event loop's end of a socket carrying frames both ways.

    ``on_frame(data)`` gets each frame received, in order; ``on_lost()`` is called once when
    the other end closes or the socket fails (a partly received frame is dropped). After
    ``close()`` neither is called again.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        on_frame: Callable[[bytearray], None],
        on_lost: Callable[[], None],
    ) -> None:
        sock.setblocking(False)
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._out: deque[memoryview] = deque()  # queued bytes, the first partly sent
        self._writing = False  # a writer callback waits for the socket to accept more
        self._header = bytearray(HEADER.size)
        self._body: bytearray | None = None  # the frame being received, once its length is
        self._view = memoryview(self._header)  # where the next bytes received go
        self._got = 0
        self.closed = False
        loop.add_reader(self._fd, self._readable)

    def send(self, data: bytes) -> None:
        """Queue one frame; it goes out as the socket accepts it. Ignored once closed."""
        if self.closed:
            return
        if len(data) <= SMALL_FRAME:
            self._out.append(memoryview(HEADER.pack(len(data)) + data))
        else:
            self._out.append(memoryview(HEADER.pack(len(data))))
            self._out.append(memoryview(data).cast("B"))
        if not self._writing:
            self._flush()
            if self._out and not self.closed:
                self._loop.add_writer(self._fd, self._flush)
                self._writing = True

    def _flush(self) -> None:
        while self._out:
            head = self._out[0]
            try:
                sent = self._sock.send(head)
            except (BlockingIOError, InterruptedError):
                return  # full: the writer callback (added by send) comes back for the rest
            except OSError:
                self._lose()
                return
            if sent == len(head):
                self._out.popleft()
            else:
                self._out[0] = head[sent:]
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False

    def _readable(self) -> None:
        taken = 0
        while taken < READ_PER_CALL and not self.closed:
            try:
                n = self._sock.recv_into(self._view[self._got :])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._lose()
                return
            if n == 0:  # the other end closed
                self._lose()
                return
            taken += n
            self._got += n
            if self._got == len(self._view):
                self._advance()

    def _advance(self) -> None:
        """The header or the body is complete: start the body, or deliver the frame."""
        if self._body is None:
            (size,) = HEADER.unpack(self._header)
            if size > MAX_FRAME:
                self._lose()
                return
            self._body = bytearray(size)
            self._view, self._got = memoryview(self._body), 0
            if size:
                return
        frame, self._body = self._body, None
        self._view, self._got = memoryview(self._header), 0
        self._on_frame(frame)

    def _lose(self) -> None:
        if not self.closed:
            self.close()
            self._on_lost()

    def close(self) -> None:
        """Stop reading and writing and close the socket; queued bytes are dropped."""
        if self.closed:
            return
        self.closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
            if self._writing:
                self._loop.remove_writer(self._fd)
        self._writing = False
        self._out.clear()
        self._sock.close()

"""Frames of any size cross a socket both ways, byte for byte, under asyncio and uvloop.

The worker's end is a blocking socket in a thread that echoes every frame; the event loop's
end is a ``Channel`` that queues every frame at once, so writes and reads overlap and a
write that blocked the loop would deadlock the test.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.api.frames import Channel, recv_frame, send_frame
from tests.support.event_loops import LOOPS, run_on

# Sizes where a send or a read is split: pipe and socket buffers, a read's chunk.
_pair = socket.socketpair()
SOCKET_BUFFER = _pair[0].getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
_pair[0].close()
_pair[1].close()
BOUNDARIES = sorted(
    {
        b + d
        for b in (4096, 65536, 1 << 18, SOCKET_BUFFER, 2 * SOCKET_BUFFER, 1 << 20, 4 << 20)
        for d in (-9, -8, -1, 0, 1, 8)
    }
)
sizes = st.one_of(st.integers(0, 64), st.integers(0, 6 << 20), st.sampled_from(BOUNDARIES))


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _echo(sock: socket.socket, count: int) -> None:
    with sock:
        for _ in range(count):
            send_frame(sock, bytes(recv_frame(sock)))


async def _round_trip(payloads: list[bytes]) -> list[bytes]:
    loop = asyncio.get_running_loop()
    mine, theirs = socket.socketpair()
    echo = threading.Thread(target=_echo, args=(theirs, len(payloads)), daemon=True)
    echo.start()
    received: list[bytes] = []
    done = loop.create_future()

    def on_frame(frame: bytearray) -> None:
        received.append(bytes(frame))
        if len(received) == len(payloads) and not done.done():
            done.set_result(None)

    def on_lost() -> None:
        if not done.done():
            done.set_exception(ConnectionError("the echo end closed early"))

    channel = Channel(loop, mine, on_frame, on_lost)
    try:
        for data in payloads:
            channel.send(data)
        await asyncio.wait_for(done, 60)
    finally:
        channel.close()
        echo.join(10)
    return received


@pytest.mark.parametrize("loop", LOOPS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(sizes, min_size=1, max_size=6), seed=st.integers(0, 2**32))
def test_frames_of_any_size_cross_both_ways(loop: str, frames: list[int], seed: int) -> None:
    payloads = [_payload(size, seed + i) for i, size in enumerate(frames)]
    received = run_on(loop, _round_trip(payloads))
    assert [len(r) for r in received] == [len(p) for p in payloads]
    assert received == payloads


@pytest.mark.parametrize("loop", LOOPS)
def test_a_closed_peer_is_reported_once_and_a_partial_frame_dropped(loop: str) -> None:
    async def scenario() -> tuple[list[bytes], int]:
        loop_ = asyncio.get_running_loop()
        mine, theirs = socket.socketpair()
        frames: list[bytes] = []
        lost = 0
        gone = loop_.create_future()

        def on_lost() -> None:
            nonlocal lost
            lost += 1
            gone.set_result(None)

        channel = Channel(loop_, mine, lambda f: frames.append(bytes(f)), on_lost)
        send_frame(theirs, b"whole")
        theirs.sendall((1000).to_bytes(8, "big") + b"only part of it")
        theirs.close()
        await asyncio.wait_for(gone, 10)
        channel.send(b"after the end")  # ignored, not raised
        channel.close()
        return frames, lost

    frames, lost = run_on(loop, scenario())
    assert frames == [b"whole"]
    assert lost == 1

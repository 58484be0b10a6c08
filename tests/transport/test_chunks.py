"""Chunked reads into one buffer and whole writes on file descriptors (transport/chunks.py)."""

from __future__ import annotations

import os
import threading

from acp_proxy.transport.chunks import ChunkReader, write_all


def test_each_read_returns_what_arrived_then_eof() -> None:
    read_fd, write_fd = os.pipe()
    try:
        reader = ChunkReader(read_fd, size=8)
        os.write(write_fd, b"abc")
        first = reader.read()
        os.write(write_fd, b"0123456789")
        second, third = reader.read(), reader.read()
        os.close(write_fd)
        assert (first, second, third) == (b"abc", b"01234567", b"89")
        # A chunk is a copy: the next read into the shared buffer does not change it.
        assert isinstance(first, bytes)
        assert reader.read() == b""
    finally:
        os.close(read_fd)


def test_write_all_writes_more_than_a_pipe_holds() -> None:
    read_fd, write_fd = os.pipe()
    data = bytes(range(256)) * 4096  # 1 MiB: several times a pipe's buffer
    got = bytearray()

    def drain() -> None:
        reader = ChunkReader(read_fd)
        while chunk := reader.read():
            got.extend(chunk)

    thread = threading.Thread(target=drain)
    thread.start()
    write_all(write_fd, memoryview(data))
    os.close(write_fd)
    thread.join(timeout=30)
    os.close(read_fd)
    assert bytes(got) == data

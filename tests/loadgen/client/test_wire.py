"""The HTTP/1.1 client layer against hand-written responses on loopback: framing, reuse, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from loadgen.client.wire import Collect, ConnectionPool, Disconnected, ProtocolError

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


async def serve(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"7\r\ndata: a\r\n10;ext=1\r\n\ndata: bb\n\ndata:\r\n0\r\nX-Trailer: 1\r\n\r\n"
)


@pytest.fixture
async def split_server() -> AsyncIterator[str]:
    """Answers every request with CHUNKED, one byte per write, on a kept-alive connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await read_request(reader)
                for i in range(len(CHUNKED)):
                    writer.write(CHUNKED[i : i + 1])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    async for url in serve(handler):
        yield url


async def test_chunked_bodies_split_anywhere_are_reassembled_and_the_connection_reused(split_server: str) -> None:
    pool = ConnectionPool(split_server)
    for _ in range(3):
        sink = Collect()
        await pool.request(pool.head("GET", "/x"), sink)
        assert sink.status == 200 and sink.headers["content-type"] == "text/event-stream"
        assert sink.body == b"data: a\ndata: bb\n\ndata:"
    assert len(pool._idle) == 1  # one connection served all three
    pool.close()


async def test_content_length_bodies_and_connection_close() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy!")
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        pool = ConnectionPool(url)
        sink = Collect()
        await pool.request(pool.head("POST", "/v1/completions", content_length=0), sink)
        assert (sink.status, sink.body) == (503, b"busy!")
        assert not pool._idle  # "Connection: close" is honoured
        pool.close()


async def test_a_pooled_connection_closed_by_the_server_is_retried_on_a_fresh_one() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # no "Connection: close": the client only learns when it reuses the connection

    async for url in serve(handler):
        pool = ConnectionPool(url)
        for _ in range(3):
            sink = Collect()
            await pool.request(pool.head("GET", "/"), sink)
            assert sink.body == b"ok"
        pool.close()


async def test_a_server_closing_mid_stream_or_talking_nonsense_is_reported() -> None:
    async def mid_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
        await writer.drain()
        writer.close()

    async for url in serve(mid_stream):
        pool = ConnectionPool(url)
        with pytest.raises(Disconnected):
            await pool.request(pool.head("GET", "/"), Collect())
        pool.close()

    async def mid_stream_capitalised(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # header values are case-insensitive: "Chunked" is chunked too
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhel")
        await writer.drain()
        writer.close()

    async for url in serve(mid_stream_capitalised):
        pool = ConnectionPool(url)
        with pytest.raises(Disconnected):
            await pool.request(pool.head("GET", "/"), Collect())
        pool.close()

    async def nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()

    async for url in serve(nonsense):
        pool = ConnectionPool(url)
        with pytest.raises(ProtocolError, match=r"not an HTTP/1\.x answer"):
            await pool.request(pool.head("GET", "/"), Collect())
        pool.close()


def test_target_urls_are_checked_and_paths_kept() -> None:
    pool = ConnectionPool("http://gateway.local:8080/ns/svc/")
    assert (pool.host, pool.port) == ("gateway.local", 8080)
    assert pool.head("GET", "/v1/models").startswith(b"GET /ns/svc/v1/models HTTP/1.1\r\nHost: gateway.local:8080")
    with pytest.raises(ValueError, match="must be http://HOST"):
        ConnectionPool("127.0.0.1:8000")

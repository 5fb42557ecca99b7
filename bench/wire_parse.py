"""How much CPU does loadgen's client spend reading one streamed answer?

Feeds a 64-token SSE answer (chunked, one event per read, as the simengine streams it) through
``loadgen.client.wire``'s connection, exactly as the event loop would hand it the bytes, N times, with no
socket and no server: what is left is the HTTP parsing and the per-piece callbacks. The last line is
``parse_us_per_response=U``.

    .venv/bin/python bench/wire_parse.py [--responses 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from loadgen.client.wire import Connection

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = b'data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" tok"}]}\n\n'
CHUNK = b"%x\r\n" % len(EVENT) + EVENT + b"\r\n"
TOKENS = 64


class _Transport:
    def write(self, data: bytes) -> None: ...

    def abort(self) -> None: ...


class _Count:
    def __init__(self) -> None:
        self.pieces = 0

    def head(self, status: int, headers: dict[str, str]) -> None: ...

    def feed(self, data: bytes, now: float) -> None:
        self.pieces += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=5000)
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    conn = Connection(time.perf_counter)
    conn.transport = _Transport()  # type: ignore[assignment]
    started = time.perf_counter()
    for _ in range(args.responses):
        done, sink = loop.create_future(), _Count()
        conn.start(b"", sink, done)
        conn.data_received(HEAD)
        for _ in range(TOKENS):
            conn.data_received(CHUNK)
        conn.data_received(b"0\r\n\r\n")
        if not (done.done() and done.result() is True and sink.pieces == TOKENS):
            raise SystemExit(f"bench: the answer was not read whole ({sink.pieces} of {TOKENS} pieces)")
    elapsed = time.perf_counter() - started
    loop.close()
    print(f"{args.responses} answers of {TOKENS} streamed tokens in {elapsed:.2f}s")
    print(f"parse_us_per_response={elapsed / args.responses * 1e6:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

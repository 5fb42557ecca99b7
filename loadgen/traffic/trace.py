"""Replay of request traces: the Azure LLM inference trace layout (CSV) and the Mooncake layout (JSON lines).

A CSV trace is a file (plain or gzip-compressed) with a header row naming at least the columns
``TIMESTAMP,ContextTokens,GeneratedTokens``, in any order (other columns are ignored):

* ``TIMESTAMP``: a datetime as in the Azure traces, ``2023-11-16 18:17:03.9799600`` (up to 9 fractional
  digits; Python's ``datetime`` takes only 6, so the fraction is read separately and nothing is lost), with
  an optional ``T`` separator and UTC offset; or plain seconds (``12.345``), as in the Mooncake conversion.
  All rows of one file use the same form.
* ``ContextTokens``: prompt tokens (a whole number >= 0).
* ``GeneratedTokens``: output tokens (a whole number >= 0; 0 is sent as ``max_tokens=1``, the least an engine
  accepts, and counted in the summary).

A Mooncake trace (``kvcache-ai/Mooncake`` ``FAST25-release/traces/*.jsonl``, also what NVIDIA's aiperf and
Dynamo replay) has one JSON object per line: ``timestamp`` (milliseconds), ``input_length``,
``output_length`` and ``hash_ids``, one id per 512-token block of the prompt, equal ids meaning equal
blocks. The ids become the prompt's content (``loadgen.traffic.prompts``), so the replay shares prefixes as the
recorded traffic did. A file is read as Mooncake when its first non-blank character is ``{``.

Times are taken relative to the first request, divided by ``speedup``, and optionally cut to a window of
the trace's own time (``start``, ``window``) and to ``max_requests``. A malformed row raises ``TraceError``
naming the file, the line, the column and the value.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from loadgen.traffic.prompts import reuse_of
from loadgen.traffic.shapes import Arrival, PromptContent

__all__ = [
    "COLUMNS",
    "MOONCAKE_BLOCK_TOKENS",
    "MOONCAKE_FIELDS",
    "Trace",
    "TraceError",
    "parse_timestamp",
    "read_trace",
]

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")
MOONCAKE_BLOCK_TOKENS = 512
"""Prompt tokens per ``hash_ids`` entry in the Mooncake traces (their README and the FAST'25 paper)."""

_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
_SECONDS = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class TraceError(ValueError):
    """A trace file that cannot be replayed: unreadable, missing a column, or with a malformed row."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace turned into a schedule, with what a report should say about it."""

    path: str
    arrivals: list[Arrival]
    rows: int
    """Data rows read from the file (before the window and ``max_requests``)."""
    speedup: float
    start: float
    window: float | None
    span: float
    """Seconds of trace time between the first and the last replayed request."""
    zero_output_rows: int = 0
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        window = f", window {self.start:g}s+{self.window:g}s" if self.window is not None else ""
        if self.window is None and self.start:
            window = f", from {self.start:g}s"
        return (
            f"trace {self.path}: {len(self.arrivals)} of {self.rows} requests{window}, "
            f"{self.span:.0f}s of trace time at {self.speedup:g}x"
        )


def parse_timestamp(text: str) -> tuple[int, float, str]:
    """``(whole seconds, fraction, form)`` of a TIMESTAMP value; ``form`` is ``"seconds"`` or ``"datetime"``.

    Whole seconds (since the epoch, for datetimes) and the fraction are kept apart because one float cannot
    hold both: at today's epoch a double resolves only about 2e-7 s, coarser than the traces' 1e-7.
    Raises ``ValueError`` with the accepted forms when ``text`` is neither.
    """
    value = text.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
        if math.isfinite(seconds):
            whole = math.floor(seconds)
            return whole, seconds - whole, "seconds"
    match = _DATETIME.fullmatch(value)
    if match is not None:
        try:
            base = datetime.fromisoformat(f"{match['date']}T{match['time']}")
        except ValueError:
            base = None
        if base is not None:
            tz = match["tz"]
            if tz is None or tz == "Z":
                base = base.replace(tzinfo=UTC)
            else:
                sign = -1 if tz[0] == "-" else 1
                hours, minutes = int(tz[1:3]), int(tz[-2:])
                base = base.replace(tzinfo=timezone(sign * timedelta(hours=hours, minutes=minutes)))
            frac = match["frac"]
            return int(base.timestamp()), (int(frac) / 10 ** len(frac) if frac else 0.0), "datetime"
    raise ValueError(
        "is not a timestamp: expected seconds (e.g. 12.5) or a datetime such as 2023-11-16 18:17:03.9799600"
    )


def _open_text(path: Path) -> io.TextIOBase:
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8", newline="")


def _tokens(raw: str) -> int:
    value = raw.strip()
    if not value.isdigit():
        raise ValueError("is not a whole number of tokens >= 0")
    return int(value)


_Row = tuple[int, int, float, int, int, PromptContent | None]


def _rows(path: Path) -> Iterator[_Row]:
    """``(line, whole seconds, fraction, context, generated, content)`` per row; raises ``TraceError`` on a
    bad row."""
    try:
        stream = _open_text(path)
        with stream:
            head = stream.read(4096)
    except OSError as err:
        raise TraceError(f"{path}: cannot read the trace: {err.strerror or err}") from None
    except (EOFError, UnicodeDecodeError) as err:
        raise TraceError(f"{path}: cannot read the trace: {err}") from None
    stream = _open_text(path)
    if head.lstrip().startswith("{"):
        with stream:
            yield from _mooncake_rows(path, stream)
        return
    with stream:
        reader = csv.reader(stream)
        try:
            header = next(reader, None)
        except (OSError, EOFError, UnicodeDecodeError, csv.Error) as err:
            raise TraceError(f"{path}: cannot read the trace: {err}") from None
        if header is None:
            raise TraceError(f"{path}: the trace is empty; expected a header row {','.join(COLUMNS)}")
        names = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in COLUMNS if c.lower() not in names]
        if missing:
            raise TraceError(
                f"{path}: line 1: the header has no column {', '.join(missing)}; expected a header row naming "
                f"{','.join(COLUMNS)} (found {','.join(header)})"
            )
        cols = [names[c.lower()] for c in COLUMNS]
        width = max(cols) + 1
        form: str | None = None
        try:
            for row in reader:
                line = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                if len(row) < width:
                    absent = COLUMNS[next(i for i, c in enumerate(cols) if c >= len(row))]
                    raise TraceError(
                        f"{path}: line {line}, column {absent}: missing value (the row has {len(row)} fields: "
                        f"{','.join(row)!r})"
                    )
                column = COLUMNS[0]
                raw = row[cols[0]]
                try:
                    whole, frac, row_form = parse_timestamp(raw)
                    if form is None:
                        form = row_form
                    elif row_form != form:
                        raise ValueError(f"is {row_form} but earlier rows use {form}; use one form per file")
                    column, raw = COLUMNS[1], row[cols[1]]
                    context = _tokens(raw)
                    column, raw = COLUMNS[2], row[cols[2]]
                    generated = _tokens(raw)
                except ValueError as err:
                    raise TraceError(f"{path}: line {line}, column {column}: {raw!r} {err}") from None
                yield line, whole, frac, context, generated, None
        except (OSError, EOFError, UnicodeDecodeError, csv.Error) as err:
            raise TraceError(f"{path}: line {reader.line_num + 1}: cannot read the trace: {err}") from None


def _mooncake_rows(path: Path, stream: io.TextIOBase) -> Iterator[_Row]:
    """The rows of a Mooncake JSON-lines trace (see the module docstring)."""
    line = 0
    try:
        for line, text in enumerate(stream, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as err:
                raise TraceError(f"{path}: line {line}: not a JSON object ({err.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}: line {line}: not a JSON object; expected one request per line")
            missing = [name for name in MOONCAKE_FIELDS if name not in row]
            if missing:
                raise TraceError(
                    f"{path}: line {line}: no field {', '.join(missing)}; a Mooncake trace row has "
                    f"{', '.join(MOONCAKE_FIELDS)} and hash_ids"
                )
            stamp, context, generated = (row[name] for name in MOONCAKE_FIELDS)
            for name, value in zip(MOONCAKE_FIELDS, (stamp, context, generated), strict=True):
                if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                    raise TraceError(f"{path}: line {line}, field {name}: {value!r} is not a number >= 0")
            for name, value in (("input_length", context), ("output_length", generated)):
                if value != int(value):
                    raise TraceError(f"{path}: line {line}, field {name}: {value!r} is not a whole number of tokens")
            millis = int(stamp) if stamp == int(stamp) else stamp
            whole, rest = divmod(millis, 1000)
            yield line, int(whole), rest / 1000, int(context), int(generated), _mooncake_content(path, line, row)
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise TraceError(f"{path}: line {line + 1}: cannot read the trace: {err}") from None


def _mooncake_content(path: Path, line: int, row: dict[str, object]) -> PromptContent | None:
    ids = row.get("hash_ids")
    if ids is None:
        return None
    context = int(row["input_length"])  # type: ignore[call-overload]
    blocks = -(-context // MOONCAKE_BLOCK_TOKENS)
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TraceError(f"{path}: line {line}, field hash_ids: expected a list of whole numbers, got {ids!r:.80}")
    if len(ids) != blocks:
        raise TraceError(
            f"{path}: line {line}, field hash_ids: {len(ids)} ids for input_length {context}; expected {blocks}, "
            f"one per {MOONCAKE_BLOCK_TOKENS}-token block"
        )
    last = context - MOONCAKE_BLOCK_TOKENS * (blocks - 1)
    return tuple((i, MOONCAKE_BLOCK_TOKENS if k < blocks - 1 else last) for k, i in enumerate(ids))


def read_trace(
    path: str | Path,
    *,
    speedup: float = 1.0,
    start: float = 0.0,
    window: float | None = None,
    max_requests: int | None = None,
) -> Trace:
    """Read a trace file into a schedule: send times from 0, ``speedup`` times faster than recorded.

    ``start`` and ``window`` select the part of the trace (in the trace's own seconds, from its first
    request) to replay; ``max_requests`` caps the count. The whole file is checked, so a malformed row
    fails before any request is sent.
    """
    if not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(f"speedup must be a number > 0, got {speedup}")
    if start < 0:
        raise ValueError(f"start must be >= 0 seconds into the trace, got {start}")
    if window is not None and window <= 0:
        raise ValueError(f"window must be > 0 seconds of trace time, got {window}")
    if max_requests is not None and max_requests < 0:
        raise ValueError(f"max_requests must be >= 0, got {max_requests}")
    path = Path(path)
    parsed = [(whole, frac, context, generated, content) for _, whole, frac, context, generated, content in _rows(path)]
    if not parsed:
        raise TraceError(f"{path}: the trace has a header but no requests")
    if any(parsed[i][:2] > parsed[i + 1][:2] for i in range(len(parsed) - 1)):
        parsed.sort(key=lambda r: r[:2])  # stable: ties keep the file's order
    # Seconds from the first request: small numbers, so a double keeps the traces' 1e-7 s resolution.
    first_whole, first_frac = parsed[0][0], parsed[0][1]
    rows = [
        ((whole - first_whole) + (frac - first_frac), context, generated, content)
        for whole, frac, context, generated, content in parsed
    ]
    origin = start
    end = math.inf if window is None else origin + window
    arrivals: list[Arrival] = []
    zero_output = 0
    first: float | None = None
    last = origin
    for seconds, context, generated, content in rows:
        if seconds < origin:
            continue
        if seconds >= end or (max_requests is not None and len(arrivals) >= max_requests):
            break
        if generated == 0:
            zero_output += 1
        first = seconds if first is None else first
        last = seconds
        arrivals.append(Arrival((seconds - origin) / speedup, context, max(generated, 1), content))
    notes: list[str] = []
    if zero_output:
        notes.append(f"{zero_output} rows with GeneratedTokens 0 were sent with max_tokens=1")
    if any(a.content is not None for a in arrivals):
        notes.append(f"Prompts share prefixes as the trace's hash_ids say: {reuse_of(arrivals).describe()}.")
    return Trace(
        path=str(path),
        arrivals=arrivals,
        rows=len(rows),
        speedup=speedup,
        start=start,
        window=window,
        span=(last - first) if first is not None else 0.0,
        zero_output_rows=zero_output,
        notes=notes,
    )

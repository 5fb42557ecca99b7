"""Trace replay parsing: Azure datetimes with 7 fractional digits, plain seconds, gzip, and clear errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from loadgen.traffic.shapes import Arrival
from loadgen.traffic.trace import TraceError, parse_timestamp, read_trace

SHARED_TRACE = Path(__file__).resolve().parents[4] / "shared" / "traces" / "mooncake_conversation_2025.csv.gz"


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_seven_fractional_digits_are_kept() -> None:
    a_whole, a_frac, form = parse_timestamp("2023-11-16 18:17:03.9799600")
    b_whole, b_frac, _ = parse_timestamp("2023-11-16 18:17:04.0000001")
    assert form == "datetime"
    assert (b_whole - a_whole) + (b_frac - a_frac) == pytest.approx(0.0200401, abs=1e-12)
    c_whole, c_frac, _ = parse_timestamp("2023-11-16T18:17:04.0000001+01:00")
    assert (b_whole - c_whole, b_frac - c_frac) == (3600, 0.0)
    assert parse_timestamp("12.5") == (12, 0.5, "seconds")


def test_azure_layout_replays_relative_to_the_first_request_with_speedup(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0799600,3180,8\n"
        "2023-11-16 18:17:05.9799600,110,27\n",
    )
    trace = read_trace(path)
    assert [a.prompt_tokens for a in trace.arrivals] == [4808, 3180, 110]
    assert [a.max_tokens for a in trace.arrivals] == [10, 8, 27]
    assert [round(a.send_time, 9) for a in trace.arrivals] == [0.0, 0.1, 2.0]
    fast = read_trace(path, speedup=4)
    assert [round(a.send_time, 9) for a in fast.arrivals] == [0.0, 0.025, 0.5]
    seventh = read_trace(
        write(
            tmp_path,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:17:03.9799600,1,1\n2023-11-16 18:17:03.9799601,1,1\n",
            "t7.csv",
        )
    )
    assert seventh.arrivals[1].send_time == pytest.approx(1e-7, abs=1e-12)
    assert trace.rows == 3 and trace.span == pytest.approx(2.0)


def test_plain_seconds_gzip_window_and_cap(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    rows = "".join(f"{i * 0.5:.3f},{100 + i},{1 + i}\n" for i in range(20))
    path.write_bytes(gzip.compress(("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows).encode()))
    trace = read_trace(path)
    assert len(trace.arrivals) == 20 and trace.arrivals[3] == Arrival(1.5, 103, 4)
    window = read_trace(path, start=2.0, window=2.0)
    assert [a.prompt_tokens for a in window.arrivals] == [104, 105, 106, 107]
    assert window.arrivals[0].send_time == 0.0
    assert len(read_trace(path, max_requests=5).arrivals) == 5


def test_columns_may_come_in_any_order_with_extras_and_zero_outputs_are_sent_as_one(tmp_path: Path) -> None:
    path = write(tmp_path, "GeneratedTokens,Other,ContextTokens,TIMESTAMP\n0,x,5,0.0\n3,y,6,1.0\n")
    trace = read_trace(path)
    assert trace.arrivals == [Arrival(0.0, 5, 1), Arrival(1.0, 6, 3)]
    assert trace.zero_output_rows == 1 and "GeneratedTokens 0" in trace.notes[0]


@pytest.mark.parametrize(
    ("body", "line", "column", "value"),
    [
        ("0.0,10,5\n0.5,1x0,5\n", 3, "ContextTokens", "'1x0'"),
        ("0.0,10,5\n0.5,10,-3\n", 3, "GeneratedTokens", "'-3'"),
        ("0.0,10,5\n\n2023-11-16 18:17:0x,10,5\n", 4, "TIMESTAMP", "'2023-11-16 18:17:0x'"),
        ("0.0,10,5\n2023-11-16 18:17:03.1,10,5\n", 3, "TIMESTAMP", "earlier rows use seconds"),
        ("0.0,10,5\n0.5,10\n", 3, "GeneratedTokens", "missing value"),
    ],
)
def test_a_malformed_row_names_file_line_column_and_value(
    tmp_path: Path, body: str, line: int, column: str, value: str
) -> None:
    path = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n" + body)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    message = str(err.value)
    assert str(path) in message
    assert f"line {line}, column {column}" in message
    assert value in message


def test_a_missing_column_or_file_is_explained(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no column GeneratedTokens"):
        read_trace(write(tmp_path, "TIMESTAMP,ContextTokens\n0,1\n"))
    with pytest.raises(TraceError, match="cannot read the trace"):
        read_trace(tmp_path / "absent.csv")
    with pytest.raises(TraceError, match="no requests"):
        read_trace(write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n"))


@pytest.mark.skipif(not SHARED_TRACE.exists(), reason="shared/traces is not beside the repository")
def test_the_shared_mooncake_trace_reads_whole() -> None:
    trace = read_trace(SHARED_TRACE)
    assert trace.rows == 12031 and len(trace.arrivals) == 12031
    assert 3500 < trace.span < 3700
    assert max(a.prompt_tokens for a in trace.arrivals) == 126195


MOONCAKE = (
    '{"timestamp": 0, "input_length": 1100, "output_length": 50, "hash_ids": [0, 1, 2]}\n'
    '{"timestamp": 1500, "input_length": 1300, "output_length": 0, "hash_ids": [0, 1, 3]}\n'
    '{"timestamp": 2500, "input_length": 400, "output_length": 20, "hash_ids": [7]}\n'
)


def test_mooncake_json_lines_replay_with_the_prefixes_their_hash_ids_share(tmp_path: Path) -> None:
    path = tmp_path / "conversation_trace.jsonl.gz"
    path.write_bytes(gzip.compress(MOONCAKE.encode()))
    trace = read_trace(path)
    assert [a[:3] for a in trace.arrivals] == [(0.0, 1100, 50), (1.5, 1300, 1), (2.5, 400, 20)]
    assert trace.arrivals[0].content == ((0, 512), (1, 512), (2, 76))
    assert trace.arrivals[1].content == ((0, 512), (1, 512), (3, 276))
    # The second request shares the first's two 512-token blocks: 1,024 tokens of 2,800.
    assert any("1,024 of 2,800 prompt tokens (36.6%) could be prefix-cache hits" in n for n in trace.notes)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1]}',
         "line 1, field hash_ids: 2 ids for input_length 1100; expected 3, one per 512-token block"),
        ('{"timestamp": 0, "output_length": 5}', "line 1: no field input_length"),
        ('{"timestamp": -1, "input_length": 10, "output_length": 5}', "line 1, field timestamp: -1 is not a number"),
        ('{"timestamp": 0, "input_length": 10.5, "output_length": 5}', "field input_length: 10.5 is not a whole"),
        ("{not json", "line 1: not a JSON object"),
    ],
)  # fmt: skip
def test_malformed_mooncake_rows_are_refused_naming_the_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_trace(path)

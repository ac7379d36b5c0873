"""The watch stream's line splitter: lines survive any chunking, in linear time.

``kubernetes.watch.iter_resp_lines`` is the behaviour being replaced (its tests cover chunk boundaries and
partial lines too); ours differs in dropping blank lines and in never re-copying its buffer per line.
"""

from __future__ import annotations

import itertools
import time

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.client.watch import LineSplitter


def split_all(chunks: list[bytes]) -> tuple[list[bytes], bytes]:
    splitter = LineSplitter()
    lines: list[bytes] = []
    for chunk in chunks:
        lines.extend(splitter.feed(chunk))
    return lines, splitter.flush()


def test_several_lines_in_one_chunk() -> None:
    assert split_all([b'{"a":1}\n{"b":2}\n{"c":3}\n']) == ([b'{"a":1}', b'{"b":2}', b'{"c":3}'], b"")


def test_a_line_split_across_chunk_boundaries_is_joined() -> None:
    assert split_all([b'{"type":', b'"ADDED"', b',"object":{}}\n{"ty', b'pe":"DELETED"}\n']) == (
        [b'{"type":"ADDED","object":{}}', b'{"type":"DELETED"}'],
        b"",
    )


def test_a_line_fed_one_byte_at_a_time() -> None:
    line = b'{"type":"MODIFIED","object":{"metadata":{"name":"x"}}}'
    assert split_all([bytes([b]) for b in line + b"\n"]) == ([line], b"")


def test_a_chunk_that_is_only_a_newline_ends_the_pending_line() -> None:
    assert split_all([b"abc", b"\n", b"def"]) == ([b"abc"], b"def")


def test_a_partial_last_line_is_left_for_flush() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":1}\n{"trunc') == [b'{"a":1}']
    assert splitter.flush() == b'{"trunc'
    assert splitter.flush() == b""


def test_blank_lines_are_dropped() -> None:
    assert split_all([b"\n\na\n\n", b"  \n", b"b\n"]) == ([b"a", b"b"], b"")


def test_a_large_object_in_many_chunks_arrives_whole() -> None:
    obj = {"type": "ADDED", "object": {"data": {f"k{i}": "v" * 100 for i in range(20_000)}}}
    line = orjson.dumps(obj)
    assert len(line) > 2_000_000
    chunks = [line[i : i + 4096] for i in range(0, len(line), 4096)] + [b"\n"]
    lines, rest = split_all(chunks)
    assert rest == b""
    assert len(lines) == 1
    assert orjson.loads(lines[0]) == obj


@given(
    lines=st.lists(
        st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b.strip()), max_size=20
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=30),
)
def test_any_chunking_yields_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(points)]
    assert split_all(chunks) == (lines, b"")


class _ChunkedResponse:
    """Just enough of a urllib3 response for ``kubernetes.watch.iter_resp_lines``."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: object = None, decode_content: bool = False) -> list[bytes]:
        return self.chunks


@pytest.mark.benchmark
def test_benchmark_line_splitting_against_kubernetes_watch() -> None:
    from kubernetes.watch.watch import iter_resp_lines

    small = b"".join(orjson.dumps({"type": "ADDED", "object": {"data": {"k": "v" * 900, "i": i}}}) + b"\n"
                     for i in range(20_000))  # fmt: skip
    large = orjson.dumps({"type": "ADDED", "object": {"data": {"k": "v" * 10_000_000}}}) + b"\n"
    cases = {
        "20k x 1 KB events, 64 KiB chunks": (small, 64 * 1024),
        "one 10 MB event, 16 KiB chunks": (large, 16 * 1024),
    }
    print()
    for name, (stream, size) in cases.items():
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        began = time.perf_counter()
        ours = split_all(chunks)[0]
        ours_s = time.perf_counter() - began
        began = time.perf_counter()
        theirs = list(iter_resp_lines(_ChunkedResponse(chunks)))
        theirs_s = time.perf_counter() - began
        assert len(ours) == len(theirs)
        mb = len(stream) / 1e6
        print(f"split {name}: ours {mb / ours_s:8.0f} MB/s, kubernetes.watch {mb / theirs_s:8.0f} MB/s")

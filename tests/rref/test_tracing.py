"""The generic trace machinery: value encoding, header, sinks, reading with typed errors."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import TypeAdapter, ValidationError

from protoref.errors import TraceFormatError
from protoref.ids import GloballyUniqueId as G
from protoref.rref.trace import EVENT_ADAPTER
from protoref.tracing import (
    DELTA,
    DELTA_OR_WHOLE,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    WHOLE,
    JsonlSink,
    MemorySink,
    NodeClock,
    NullSink,
    SetDelta,
    TlaSet,
    TraceHeader,
    read_trace,
    sort_key,
    tla_set,
)

IDS: TypeAdapter[frozenset[G]] = TypeAdapter(TlaSet[G])


def test_sets_encode_sorted_and_decode() -> None:
    value = frozenset({G("w0", 10), G("w0", 9), G("w1", 1)})
    encoded = IDS.dump_python(value, mode="json")
    assert encoded == {"#set": [["w0", 9], ["w0", 10], ["w1", 1]]}
    assert IDS.validate_python(encoded) == value
    assert IDS.validate_json('{"#set": []}') == frozenset()


def test_set_with_extra_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="#set"):
        IDS.validate_python({"#set": [], "x": 1})


def test_sort_key_orders_mixed_values() -> None:
    values = [{"a": 1}, "b", ["w0", 2], 3, True]
    assert sorted(values, key=sort_key) == [True, 3, "b", ["w0", 2], {"a": 1}]
    assert tla_set(["b", "a"]) == {"#set": ["a", "b"]}


def test_node_clock() -> None:
    clock = NodeClock()
    assert clock.local() == (1, 1)
    assert clock.receive(10) == (2, 11)
    assert clock.receive(3) == (3, 12)


def test_null_sink_is_disabled() -> None:
    sink = NullSink()
    assert sink.enabled is False
    sink.header(TraceHeader(protocol="rref", nodes=("w0",), seed=1))
    sink.close()


def test_header_line_and_jsonl_sink(tmp_path: Path) -> None:
    header = TraceHeader(protocol="rref", nodes=("w0", "w1"), settings={"G1": True}, seed=5)
    path = tmp_path / "h.ndjson"
    with JsonlSink(path) as sink:
        sink.header(header)
    line = path.read_text().splitlines()[0]
    assert TraceHeader.model_validate_json(line) == header
    memory = MemorySink()
    memory.header(header)
    assert memory.lines() == [line]


def test_read_trace_names_the_bad_line() -> None:
    header = TraceHeader(protocol="rref", nodes=("w0",), seed=1).model_dump_json()
    bad = (
        '{"kind":"event","event":"NoSuchAction","node":"w0","seq":1,"lamport":1,'
        '"args":{},"post":{}}'
    )
    with pytest.raises(TraceFormatError) as info:
        read_trace([header, bad], EVENT_ADAPTER, source="t.ndjson")
    assert info.value.line == 2
    assert "t.ndjson:2" in str(info.value)
    with pytest.raises(TraceFormatError, match="empty trace"):
        read_trace([], EVENT_ADAPTER)
    with pytest.raises(TraceFormatError, match="schema_version"):
        read_trace(
            [header.replace(f'"schema_version":{SCHEMA_VERSION}', '"schema_version":5')],
            EVENT_ADAPTER,
        )


def test_header_versions() -> None:
    # Written: the current version; read: every supported one, nothing else.
    header = TraceHeader(protocol="rref", nodes=("w0",), seed=1)
    assert header.schema_version == SCHEMA_VERSION == 4
    assert SUPPORTED_SCHEMA_VERSIONS == (2, 3, 4)
    line = header.model_dump_json()
    for version in SUPPORTED_SCHEMA_VERSIONS:
        old = line.replace('"schema_version":4', f'"schema_version":{version}')
        assert read_trace([old], EVENT_ADAPTER).header.schema_version == version
    for version in (1, 5):
        with pytest.raises(TraceFormatError, match="schema_version"):
            read_trace(
                [line.replace('"schema_version":4', f'"schema_version":{version}')], EVENT_ADAPTER
            )


IdDelta = Annotated[Annotated[SetDelta[G], DELTA] | Annotated[TlaSet[G], WHOLE], DELTA_OR_WHOLE]
DELTAS: TypeAdapter[SetDelta[G] | frozenset[G]] = TypeAdapter(IdDelta)


@pytest.mark.parametrize(
    "text",
    [
        '{"#add":[],"#del":[]}',
        '{"#add":[["w0",9],["w0",10],["w1",1]],"#del":[]}',
        '{"#add":[],"#del":[["w0",2]]}',
        '{"#add":[["w0",3]],"#del":[["w0",1],["w2",0]]}',
    ],
)
def test_delta_round_trips(text: str) -> None:
    delta = DELTAS.validate_json(text)
    assert isinstance(delta, SetDelta)
    assert DELTAS.dump_json(delta).decode() == text
    # the same through the model alone, from shuffled input
    model = SetDelta[G]
    raw = json.loads(text)
    shuffled = {"#del": raw["#del"][::-1], "#add": raw["#add"][::-1]}
    assert model.model_validate(shuffled).model_dump_json() == text


def test_delta_applies_to_the_last_value() -> None:
    model = SetDelta[G]
    last = frozenset({G("w0", 1), G("w0", 2)})
    now = frozenset({G("w0", 2), G("w0", 3)})
    delta = model.between(last, now)
    assert delta == model.of(frozenset({G("w0", 3)}), frozenset({G("w0", 1)}))
    assert delta.apply(last) == now
    assert model.between(now, now).apply(now) == now
    assert DELTAS.dump_python(delta, mode="json") == {"#add": [["w0", 3]], "#del": [["w0", 1]]}


def test_a_whole_set_is_taken_where_a_delta_may_be() -> None:
    # Schema 3 readers take {"#set": [...]} as the node's new value (schema 2, other tracers).
    value = DELTAS.validate_json('{"#set":[["w0",2],["w0",1]]}')
    assert value == frozenset({G("w0", 1), G("w0", 2)})
    assert DELTAS.dump_json(value).decode() == '{"#set":[["w0",1],["w0",2]]}'


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('{"#add":[]}', "#del", "Field required"),
        ('{"#del":[]}', "#add", "Field required"),
        ('{"#add":[],"#del":[],"#x":[]}', "#x", "Extra inputs are not permitted"),
        ('{"#add":5,"#del":[]}', "#add", "valid array"),
        ('{"#add":[],"#del":{"#set":[]}}', "#del", "valid array"),
        ('{"#add":[["w0","one"]],"#del":[]}', "#add", "valid integer"),
        ('{"#set":[],"#add":[]}', "", "per-node set is logged as"),
        ('{"#set":[],"#add":[],"#del":[]}', "", "per-node set is logged as"),
        ('{"add":[],"delete":[]}', "", "per-node set is logged as"),
        ("{}", "", "per-node set is logged as"),
        ("[]", "", "per-node set is logged as"),
    ],
)
def test_malformed_deltas_are_refused(text: str, where: str, problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        DELTAS.validate_json(text)
    first = info.value.errors()[0]
    assert problem in first["msg"]
    if where:
        assert first["loc"][:2] == ("delta", where)
    else:
        assert first["type"] == "set_delta"
    # in a trace: a TraceFormatError naming the line and the field
    header = TraceHeader(protocol="rref", nodes=("w0",), seed=1).model_dump_json()
    event = (
        '{"kind":"event","event":"DropRRef","node":"w0","seq":1,"lamport":1,'
        '"args":{"w":"w0","f":["w0",1]},"post":{"held":' + text + "}}"
    )
    with pytest.raises(TraceFormatError, match=f"t.ndjson:2.*post.held.*{problem}"):
        read_trace([header, event], EVENT_ADAPTER, source="t.ndjson")


def test_jsonl_sink_buffers_and_flushes(tmp_path: Path) -> None:
    # No system call per line: lines reach the file when the buffer fills, on flush and on
    # close. A process that dies without closing loses at most the buffer.
    path = tmp_path / "b.ndjson"
    sink = JsonlSink(path, buffer_bytes=4096)
    sink.header(TraceHeader(protocol="rref", nodes=("w0",), seed=1))
    sink.emit_line('{"x":1}')
    assert path.read_text() == ""
    sink.flush()
    assert path.read_text().splitlines()[1] == '{"x":1}'
    line = '{"pad":"' + "p" * 100 + '"}'
    for _ in range(1000):  # about 110 KB
        sink.emit_line(line)
    written = path.stat().st_size
    total = len(path.read_text().splitlines()[0]) + 1 + 8 + 1000 * (len(line) + 1)
    # Unwritten: at most the file's buffer plus the text layer's chunk (8 KiB).
    assert 0 < total - written <= 4096 + 8192
    sink.close()
    assert path.stat().st_size == total
    lines = path.read_text().splitlines()
    assert lines[2:] == [line] * 1000


def test_jsonl_sink_keeps_concurrent_threads_lines_whole(tmp_path: Path) -> None:
    # Threads log without a lock per line (LineLogger.msg): every line reaches the file once
    # and whole, each thread's lines in the order it logged them, with batches (a small
    # buffer) written while the others append.
    path = tmp_path / "threads.ndjson"
    sink = JsonlSink(path, buffer_bytes=512)
    threads, per_thread = 4, 5000
    start = threading.Barrier(threads)

    def log(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            sink.emit_line(f'{{"t":{t},"i":{i}}}')

    workers = [threading.Thread(target=log, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    sink.close()
    seen: dict[int, list[int]] = {t: [] for t in range(threads)}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        seen[record["t"]].append(record["i"])
    assert all(seen[t] == list(range(per_thread)) for t in range(threads))


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # the unclosed file, on purpose
def test_jsonl_sink_writes_pending_lines_when_collected(tmp_path: Path) -> None:
    # Lines still in the logger's batch reach the file when the sink is garbage-collected
    # without close(), as an open file's buffer does.
    path = tmp_path / "gc.ndjson"
    sink = JsonlSink(path)
    sink.emit_line('{"x":1}')
    sink.emit_line('{"x":2}')
    assert path.read_text() == ""
    del sink
    gc.collect()
    assert path.read_text().splitlines() == ['{"x":1}', '{"x":2}']


def test_jsonl_sink_writes_pending_lines_at_exit(tmp_path: Path) -> None:
    # ...and at a normal interpreter exit.
    path = tmp_path / "exit.ndjson"
    program = (
        "import sys\n"
        "from protoref.tracing import JsonlSink\n"
        "sink = JsonlSink(sys.argv[1])\n"
        "sink.emit_line('{\"x\":1}')\n"
    )
    subprocess.run([sys.executable, "-c", program, str(path)], check=True)
    assert path.read_text().splitlines() == ['{"x":1}']

"""Cache files filled by several processes at once (Train workers on a cold cache)."""

from __future__ import annotations

import multiprocessing

import pytest

from doctune_core.data.atomic import atomic_file


def test_two_writers_of_one_target_at_once_both_finish_and_the_last_rename_wins(tmp_path):
    target = tmp_path / "cache" / "data.adj"
    with atomic_file(target) as first, atomic_file(target) as second:
        first.write(b"first")
        second.write(b"second")
    assert target.read_bytes() == b"first"  # the outer block ends last
    assert [p.name for p in target.parent.iterdir()] == ["data.adj"]


def test_a_writer_that_fails_leaves_neither_the_target_nor_its_temporary_file(tmp_path):
    target = tmp_path / "data.adj"
    with pytest.raises(RuntimeError), atomic_file(target, "w", encoding="utf-8") as out:
        out.write("half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def _write(target, payload: bytes, start) -> None:
    start.wait()
    for _ in range(50):
        with atomic_file(target) as out:
            out.write(payload)


def test_processes_racing_on_one_target_never_fail_and_leave_one_whole_file(tmp_path):
    target = tmp_path / "member"
    payload = bytes(range(256)) * 4096  # 1 MiB: long enough for the writes to overlap
    start = multiprocessing.get_context("fork").Barrier(4)
    writers = [
        multiprocessing.get_context("fork").Process(target=_write, args=(target, payload, start)) for _ in range(4)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [writer.exitcode for writer in writers] == [0, 0, 0, 0]
    assert target.read_bytes() == payload
    assert [p.name for p in tmp_path.iterdir()] == ["member"]

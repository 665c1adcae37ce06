"""The ledger of locked-part readings (``evaluators.readings``): every reading counted, by part,
none lost when several processes write at once."""

from __future__ import annotations

import json
import multiprocessing

from evaluators.readings import READINGS_ENV, ReadingCount, locked_parts, read_ledger, record_reading


def test_each_reading_counts_the_earlier_ones_that_read_one_of_its_parts(tmp_path, monkeypatch):
    ledger = tmp_path / "readings.jsonl"
    monkeypatch.setenv(READINGS_ENV, str(ledger))
    first = record_reading({"needle-retrieval": 11, "r8-fewshot": 22}, "a search's end", tmp_path / "run")
    assert first.before == 0 and first.ledger == str(ledger)
    assert first.describe() == "the locked part's first reading on this cache"
    assert record_reading({"r8-fewshot": 22}, "a study").before == 1  # shares R8's part
    assert record_reading({"r8-fewshot": 99}, "another R8 part").before == 0  # another digest: another part
    third = record_reading({"needle-retrieval": 11, "r8-fewshot": 22}, "the search again")
    assert third.before == 2 and "read 2 times before on this cache" in third.describe()
    assert "not independent of the earlier ones" in third.describe()
    entries = read_ledger()
    assert [e.what for e in entries] == ["a search's end", "a study", "another R8 part", "the search again"]
    assert entries[0].run_dir == str(tmp_path / "run") and entries[1].run_dir is None
    assert entries[0].commit and entries[0].time.endswith("+00:00")  # this checkout's commit, in UTC
    assert ReadingCount.from_record(json.loads(json.dumps(third.record()))) == third


def test_locked_parts_are_the_test_parts_a_row_scored_with_their_digests():
    scores = {
        "r8-fewshot": {"val": {"main": 0.8, "part_digest": 1.0}, "test": {"main": 0.7, "part_digest": 42.0}},
        "news-title-retrieval": {"val": {"main": 0.6, "part_digest": 2.0}},
    }
    assert locked_parts(scores) == {"r8-fewshot": 42}


def _read_once(ledger: str, index: int, counts) -> None:
    import os

    os.environ[READINGS_ENV] = ledger
    counts.put(record_reading({"r8-fewshot": 7}, f"reader {index}").before)


def test_readings_written_at_once_by_several_processes_are_all_kept_and_counted_once_each(tmp_path):
    ledger = str(tmp_path / "readings.jsonl")
    context = multiprocessing.get_context("spawn")
    counts = context.Queue()
    readers = [context.Process(target=_read_once, args=(ledger, i, counts)) for i in range(6)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(60)
    # each saw the ones before it, under the lock: 0 to 5, each once
    assert sorted(counts.get(timeout=5) for _ in readers) == list(range(6))
    assert len((tmp_path / "readings.jsonl").read_text().splitlines()) == 6

"""Corpus sources, read as Ray Datasets of raw documents.

A source is one of:

- ``news-articles``: the packaged default (see ``doctune_core.data.news``), held-out part excluded;
- a local file: ``.jsonl`` (one object per line with a ``text`` field), ``.txt`` (one document
  per line), ``.parquet`` (a ``text`` column), or a directory of such files (``.txt`` files there
  hold one document each; ``.jsonl`` and ``.parquet`` files are read as above);
- ``hf:<dataset id>[:<split>]``: a Hugging Face dataset with a ``text`` column, streamed (a hub id
  needs the hub; a local dataset directory does not).

``check_source`` is the cheap part (does it exist, is it a format doctune reads), run before Ray
starts; ``source_dataset`` reads it inside Ray tasks, one task per file (or per shard of a
Hugging Face dataset), so the driver never holds the corpus. Each row is ``{"text": str,
"replaced_invalid_utf8": int}``; the second column is 1 on the first document of a file whose
bytes were not all UTF-8 (they are replaced by U+FFFD and counted, never dropped silently).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from doctune_core.data.wheels import DataUnavailable

PACKAGED = "news-articles"
FILE_SUFFIXES = (".jsonl", ".txt", ".parquet")


HEAD_BYTES = 1 << 16  # how much of each file the check before Ray reads


def check_source(source: str) -> None:
    """Raise ``DataUnavailable`` naming the problem if ``source`` cannot be a corpus: it exists in
    a format doctune reads, and the beginning of each file reads as that format (a binary file
    named .jsonl, a file with no document: found in milliseconds, before any Ray Data job)."""
    if source == PACKAGED or source.startswith("hf:"):
        return
    files = _source_files(source)
    documents = sum(_check_head(path) for path in files)
    if documents == 0:
        where = f"corpus {Path(source).expanduser()}"
        raise DataUnavailable(f"{where} holds no non-empty document; give it text (one document per line or record)")


def _check_head(path: Path) -> int:
    """The documents seen in the first ``HEAD_BYTES`` of ``path`` (at least 1 when it is larger),
    or ``DataUnavailable`` when that beginning is not the format its suffix says."""
    if path.suffix == ".parquet":
        return int(_parquet_file(path).metadata.num_rows > 0)
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
        more = bool(handle.read(1))
    if b"\x00" in head:
        raise DataUnavailable(
            f"corpus {path} is binary, not text (a NUL byte in its first {len(head):,} bytes); give a "
            f"{path.suffix} file of text"
        )
    lines = head.decode("utf-8", errors="replace").splitlines()
    if more and lines:
        lines = lines[:-1]  # the last line read may be cut
    if path.suffix == ".jsonl":
        documents = sum(1 for _ in _jsonl_texts(path, "\n".join(lines)))
    else:
        documents = sum(1 for line in lines if line.strip())
    return max(documents, int(more))


def _source_files(source: str) -> list[Path]:
    path = Path(source).expanduser()
    if not path.exists():
        raise DataUnavailable(
            f"corpus source {source!r} is neither {PACKAGED!r}, 'hf:<dataset id>', nor an existing "
            ".jsonl/.txt/.parquet file or directory of such files"
        )
    if path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.suffix in FILE_SUFFIXES and f.is_file())
        if not files:
            raise DataUnavailable(f"corpus directory {path} holds no .txt, .jsonl or .parquet files")
        return files
    if path.suffix not in FILE_SUFFIXES:
        raise DataUnavailable(f"corpus file {path} has suffix {path.suffix!r}; use .jsonl, .txt or .parquet")
    return [path]


def source_identity(source: str, max_documents: int | None, version: int) -> str:
    """The prepared corpus's cache key: the source, the cap, the preparation version and, for
    files, each file's path, size and modification time (an edited file is prepared again)."""
    ident: dict = {"source": source, "max_documents": max_documents, "version": version}
    if source != PACKAGED and not source.startswith("hf:"):
        ident["files"] = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in _source_files(source)]
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def source_dataset(source: str):
    """``source``'s raw documents as a Ray Dataset, in source order."""
    import ray.data

    if source.startswith("hf:"):
        units = _hf_units(source[3:])
    elif source == PACKAGED:
        units = [{"unit": PACKAGED}]
    else:
        whole_files = Path(source).expanduser().is_dir()  # a folder's .txt files are one document each
        units = [{"unit": str(f), "whole_file": whole_files} for f in _source_files(source)]
    # num_cpus=0: reading is light next to sentence splitting, and a reading task that waited for a
    # CPU the splitting actors hold would wait for ever on a one-CPU machine
    return ray.data.from_items(units).flat_map(_unit_documents, num_cpus=0)


def local_texts(source: str) -> Iterator[str]:
    """The documents of a local file or directory source, read in this process (an evaluation
    task's collection: small next to a pretraining corpus, so no Ray Data job)."""
    whole_files = Path(source).expanduser().is_dir()
    for path in _source_files(source):
        yield from (row["text"] for row in _unit_documents({"unit": str(path), "whole_file": whole_files}))


def _unit_documents(row: dict) -> Iterator[dict]:
    unit = row["unit"]
    if unit.startswith("hf:"):
        yield from ({"text": text, "replaced_invalid_utf8": 0} for text in _hf_texts(row))
        return
    if unit == PACKAGED:
        from doctune_core.data.news import pretraining_articles

        for article in pretraining_articles():
            yield {"text": article.text, "replaced_invalid_utf8": 0}
        return
    path = Path(unit)
    if path.suffix == ".parquet":
        yield from ({"text": text, "replaced_invalid_utf8": 0} for text in _parquet_texts(path))
        return
    raw = path.read_bytes()
    try:
        text, replaced = raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text, replaced = raw.decode("utf-8", errors="replace"), 1
    if path.suffix == ".txt" and row["whole_file"]:
        texts: Iterator[str] = iter([text])
    elif path.suffix == ".txt":
        texts = iter(text.splitlines())
    else:
        texts = _jsonl_texts(path, text)
    for document in texts:
        yield {"text": document, "replaced_invalid_utf8": replaced}
        replaced = 0  # counted once per file


def _jsonl_texts(path: Path, content: str) -> Iterator[str]:
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataUnavailable(f"corpus {path} line {number} is not JSON ({err.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise DataUnavailable(f'corpus {path} line {number} has no string "text" field')
        yield record["text"]


def _parquet_file(path: Path):
    """The Parquet file, checked to be one and to have a ``text`` column."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
    except Exception as err:
        raise DataUnavailable(f"corpus {path} is not a readable Parquet file ({err})") from None
    if "text" not in handle.schema_arrow.names:
        raise DataUnavailable(f"corpus {path} has no 'text' column (columns: {handle.schema_arrow.names})")
    return handle


def _parquet_texts(path: Path) -> Iterator[str]:
    for batch in _parquet_file(path).iter_batches(columns=["text"], batch_size=1024):
        yield from (t for t in batch.column("text").to_pylist() if isinstance(t, str))


def _hf_units(spec: str) -> list[dict]:
    """One unit per shard of the streamed dataset (its files), checked for a ``text`` column."""
    data = _hf_stream(spec)
    columns = data.column_names if data.column_names is not None else list(next(iter(data), {}))
    if "text" not in columns:
        raise DataUnavailable(f"dataset {spec.partition(':')[0]!r} has no 'text' column (columns: {columns})")
    return [{"unit": f"hf:{spec}", "shard": i, "shards": data.n_shards} for i in range(data.n_shards)]


def _hf_stream(spec: str):
    name, _, split = spec.partition(":")
    try:
        import datasets

        return datasets.load_dataset(name, split=split or "train", streaming=True)
    except Exception as err:
        raise DataUnavailable(f"could not load Hugging Face dataset {name!r}: {err}") from None


def _hf_texts(row: dict) -> Iterator[str]:
    shard = _hf_stream(row["unit"][3:]).shard(num_shards=row["shards"], index=row["shard"])
    for record in shard.select_columns(["text"]):
        if isinstance(record["text"], str):
            yield record["text"]

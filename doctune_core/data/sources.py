"""Corpus sources, read as Ray Datasets of raw documents.

A source is one of:

- ``news-articles``: the packaged default (see ``doctune_core.data.news``), held-out part excluded;
- a local file: ``.jsonl`` (one object per line with a ``text`` field), ``.txt`` (one document
  per line), ``.parquet`` (a ``text`` column), or a directory of such files (``.txt`` files there
  hold one document each; ``.jsonl`` and ``.parquet`` files are read as above);
- ``hf:<dataset id>[:<split>]``: a Hugging Face dataset with a ``text`` column, streamed (a hub id
  needs the hub; a local dataset directory does not);
- a URI pyarrow opens (``s3://bucket/prefix``, with ``?endpoint_override=HOST:PORT&scheme=http`` for
  an S3-compatible server; ``gs://``; any other pyarrow file system): a file or a prefix of files as
  above, read by each Ray task straight from the bucket (credentials from the environment, as for
  ``--storage``), so no node needs a copy; prepared once, as a local corpus is, and prepared again
  when a file's size or modification time changes.

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
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from doctune_core.data.wheels import DataUnavailable
from doctune_core.run_files import RunFiles

PACKAGED = "news-articles"
FILE_SUFFIXES = (".jsonl", ".txt", ".parquet")
_SUFFIXES = ".jsonl, .txt or .parquet"


HEAD_BYTES = 1 << 16  # how much of each file the check before Ray reads


def check_source(source: str) -> None:
    """Raise ``DataUnavailable`` naming the problem if ``source`` cannot be a corpus: it exists in
    a format doctune reads, and the beginning of each file reads as that format (a binary file
    named .jsonl, a file with no document: found in milliseconds, before any Ray Data job)."""
    if source == PACKAGED or source.startswith("hf:"):
        return
    if is_uri(source):
        documents = sum(_check_bucket_head(file) for file in _bucket_files(source)[1])
        where = f"corpus {source}"
    else:
        documents = sum(_check_head(path) for path in _source_files(source))
        where = f"corpus {Path(source).expanduser()}"
    if documents == 0:
        raise DataUnavailable(f"{where} holds no non-empty document; give it text (one document per line or record)")


def is_uri(source: str) -> bool:
    """Whether ``source`` names a file or a prefix on a file system pyarrow opens by URI (a bucket)."""
    return "://" in source


class BucketFile(NamedTuple):
    """A corpus file at a URI: the files it is in, its path there, its size and modification time."""

    files: RunFiles
    relative: str
    size: int
    mtime_ns: int


def _bucket_files(source: str) -> tuple[bool, list[BucketFile]]:
    """Whether the URI ``source`` names a prefix (its .txt files hold one document each, as a
    folder's do), and its corpus files (the file it names, or every .jsonl/.txt/.parquet file under
    the prefix), listed once; ``DataUnavailable`` where there are none."""
    import pyarrow.fs

    try:
        files = RunFiles.at(source)
        found = files.filesystem.get_file_info(files.root)
    except (OSError, ValueError) as err:
        raise DataUnavailable(
            f"corpus source {source!r} could not be opened ({str(err).splitlines()[0]}); give a URI pyarrow opens "
            "(s3://bucket/prefix, with ?endpoint_override=HOST:PORT&scheme=http for an S3-compatible server, "
            "gs://bucket/prefix) with its credentials in the environment"
        ) from None
    if found.type == pyarrow.fs.FileType.File:
        parent, _, name = files.root.rpartition("/")
        if PurePosixPath(name).suffix not in FILE_SUFFIXES:
            raise DataUnavailable(f"corpus file {source} has suffix {PurePosixPath(name).suffix!r}; use {_SUFFIXES}")
        return False, [BucketFile(RunFiles(files.uri, files.filesystem, parent), name, found.size, found.mtime_ns)]
    if found.type != pyarrow.fs.FileType.Directory:
        raise DataUnavailable(
            f"corpus source {source} does not exist; check the bucket, the prefix and the credentials"
        )
    stamps = files.stamps()
    found_files = [BucketFile(files, r, *stamps[r]) for r in sorted(stamps) if PurePosixPath(r).suffix in FILE_SUFFIXES]
    if not found_files:
        raise DataUnavailable(f"corpus prefix {source} holds no {_SUFFIXES} files")
    return True, found_files


def _check_bucket_head(file: BucketFile) -> int:
    """``_check_head`` of a file in a bucket: its first ``HEAD_BYTES`` fetched (a Parquet file's
    footer), not the file."""
    files, path = file.files, file.files.path(file.relative)
    suffix, name = PurePosixPath(file.relative).suffix, f"{files.uri.split('://')[0]}://{path}"
    if suffix == ".parquet":
        return int(_parquet_file(files.filesystem.open_input_file(path), name).metadata.num_rows > 0)
    with files.filesystem.open_input_stream(path) as handle:
        head = handle.read(HEAD_BYTES + 1)
    return _documents_in_head(head[:HEAD_BYTES], len(head) > HEAD_BYTES, suffix, name)


def _check_head(path: Path) -> int:
    """The documents seen in the first ``HEAD_BYTES`` of ``path`` (at least 1 when it is larger),
    or ``DataUnavailable`` when that beginning is not the format its suffix says."""
    if path.suffix == ".parquet":
        return int(_parquet_file(path, path).metadata.num_rows > 0)
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
        more = bool(handle.read(1))
    return _documents_in_head(head, more, path.suffix, path)


def _documents_in_head(head: bytes, more: bool, suffix: str, name) -> int:
    """The documents in a text file's first bytes ``head`` (``more``: the file goes on)."""
    if b"\x00" in head:
        raise DataUnavailable(
            f"corpus {name} is binary, not text (a NUL byte in its first {len(head):,} bytes); give a "
            f"{suffix} file of text"
        )
    lines = head.decode("utf-8", errors="replace").splitlines()
    if more and lines:
        lines = lines[:-1]  # the last line read may be cut
    if suffix == ".jsonl":
        documents = sum(1 for _ in _jsonl_texts(name, "\n".join(lines)))
    else:
        documents = sum(1 for line in lines if line.strip())
    return max(documents, int(more))


def _source_files(source: str) -> list[Path]:
    path = Path(source).expanduser()
    if not path.exists():
        raise DataUnavailable(
            f"corpus source {source!r} is neither {PACKAGED!r}, 'hf:<dataset id>', a bucket URI "
            "(s3://bucket/prefix, gs://...), nor an existing .jsonl/.txt/.parquet file or directory of such files"
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
    if is_uri(source):
        ident["files"] = [(f.files.path(f.relative), f.size, f.mtime_ns) for f in _bucket_files(source)[1]]
    elif source != PACKAGED and not source.startswith("hf:"):
        ident["files"] = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in _source_files(source)]
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def source_dataset(source: str):
    """``source``'s raw documents as a Ray Dataset, in source order."""
    import ray.data

    if source.startswith("hf:"):
        units = _hf_units(source[3:])
    elif source == PACKAGED:
        units = [{"unit": PACKAGED}]
    elif is_uri(source):
        prefix, files = _bucket_files(source)
        units = [{"unit": f.relative, "files": f.files, "whole_file": prefix} for f in files]
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
    files: RunFiles | None = row.get("files")  # a file in a bucket
    path = PurePosixPath(unit) if files else Path(unit)
    if path.suffix == ".parquet":
        opened = files.filesystem.open_input_file(files.path(unit)) if files else path
        yield from ({"text": text, "replaced_invalid_utf8": 0} for text in _parquet_texts(opened, path))
        return
    raw = files.read(unit) if files else path.read_bytes()
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


def _jsonl_texts(path, content: str) -> Iterator[str]:
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


def _parquet_file(source, path):
    """The Parquet file ``source`` (a path or an open file; ``path`` names it in messages), checked
    to be one and to have a ``text`` column."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(source)
    except Exception as err:
        raise DataUnavailable(f"corpus {path} is not a readable Parquet file ({err})") from None
    if "text" not in handle.schema_arrow.names:
        raise DataUnavailable(f"corpus {path} has no 'text' column (columns: {handle.schema_arrow.names})")
    return handle


def _parquet_texts(source, path) -> Iterator[str]:
    for batch in _parquet_file(source, path).iter_batches(columns=["text"], batch_size=1024):
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

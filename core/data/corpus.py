"""Pretraining corpora, prepared once into sentence-split documents.

A corpus source is one of:

- ``news-articles``: the packaged default (see ``core.data.news``), held-out part excluded;
- a local file: ``.jsonl`` (one object per line with a ``text`` field), ``.txt`` (one document
  per line), ``.parquet`` (a ``text`` column), or a directory of ``.txt`` files (one document each);
- ``hf:<dataset id>[:<split>]``: a Hugging Face dataset with a ``text`` column (needs the hub).

Preparation splits every document into sentences with spaCy's rule-based sentencizer (no model
needed) and writes ``{"sentences": [...]}`` lines to the cache, keyed by the source's identity,
so every trial and every worker reads the same prepared file. What preparation does to odd
input is counted in ``CorpusStats``, never done silently: empty documents are dropped, bytes
that are not UTF-8 are replaced (U+FFFD), documents over ``MAX_DOCUMENT_CHARS`` are truncated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from core.data.atomic import atomic_file
from core.data.wheels import DataUnavailable, cache_dir

MAX_DOCUMENT_CHARS = 100_000  # about 20k words; longer documents are truncated (and counted)
PREPARATION_VERSION = 1  # bump when the sentence splitting changes


@dataclass(frozen=True)
class CorpusStats:
    documents: int
    sentences: int
    single_sentence_documents: int
    dropped_empty: int
    truncated: int
    replaced_invalid_utf8: int


def _read_text_file(path: Path, counters: dict[str, int]) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        counters["replaced_invalid_utf8"] += 1
        return raw.decode("utf-8", errors="replace")


def _lines(path: Path, counters: dict[str, int]) -> list[str]:
    return _read_text_file(path, counters).splitlines()


def _raw_documents(source: str, counters: dict[str, int]) -> Iterator[str]:
    if source == "news-articles":
        from core.data.news import pretraining_articles

        for article in pretraining_articles():
            yield article.text
        return
    if source.startswith("hf:"):
        yield from _hf_documents(source[3:])
        return
    path = Path(source).expanduser()
    if not path.exists():
        raise DataUnavailable(
            f"corpus source {source!r} is neither 'news-articles', 'hf:<dataset id>', nor an existing "
            ".jsonl/.txt/.parquet file or directory of .txt files"
        )
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise DataUnavailable(f"corpus directory {path} holds no .txt files (one document per file)")
        for file in files:
            yield _read_text_file(file, counters)
    elif path.suffix == ".jsonl":
        for number, line in enumerate(_lines(path, counters), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataUnavailable(f"corpus {path} line {number} is not JSON ({err.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise DataUnavailable(f'corpus {path} line {number} has no string "text" field')
            yield record["text"]
    elif path.suffix == ".txt":
        yield from _lines(path, counters)
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if "text" not in table.column_names:
            raise DataUnavailable(f"corpus {path} has no 'text' column (columns: {table.column_names})")
        yield from (t for t in table.column("text").to_pylist() if isinstance(t, str))
    else:
        raise DataUnavailable(f"corpus file {path} has suffix {path.suffix!r}; use .jsonl, .txt or .parquet")


def _hf_documents(spec: str) -> Iterator[str]:
    name, _, split = spec.partition(":")
    try:
        import datasets

        data = datasets.load_dataset(name, split=split or "train")
    except Exception as err:
        raise DataUnavailable(f"could not load Hugging Face dataset {name!r}: {err}") from None
    if "text" not in data.column_names:
        raise DataUnavailable(f"dataset {name!r} has no 'text' column (columns: {data.column_names})")
    yield from data["text"]


def _source_identity(source: str, max_documents: int | None) -> str:
    path = Path(source).expanduser()
    ident = {"source": source, "max_documents": max_documents, "version": PREPARATION_VERSION}
    if path.exists():
        files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
        ident["files"] = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def prepare_corpus(source: str, max_documents: int | None = None) -> tuple[Path, CorpusStats]:
    """Sentence-split ``source`` into the cache (once) and return the prepared file and its stats."""
    target = cache_dir() / "corpora" / f"{_source_identity(source, max_documents)}.jsonl"
    stats_file = target.with_suffix(".stats.json")
    if target.exists() and stats_file.exists():
        return target, CorpusStats(**json.loads(stats_file.read_text()))

    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.max_length = MAX_DOCUMENT_CHARS + 1
    counters = {"dropped_empty": 0, "truncated": 0, "replaced_invalid_utf8": 0}

    def cleaned() -> Iterator[str]:
        kept = 0
        for text in _raw_documents(source, counters):
            text = " ".join(text.split())
            if not text:
                counters["dropped_empty"] += 1
                continue
            if len(text) > MAX_DOCUMENT_CHARS:
                counters["truncated"] += 1
                text = text[:MAX_DOCUMENT_CHARS]
            yield text
            kept += 1
            if max_documents is not None and kept >= max_documents:
                return

    documents = sentences = single = 0
    with atomic_file(target, "w", encoding="utf-8") as out:
        for doc in nlp.pipe(cleaned(), batch_size=64):
            sents = [s.text.strip() for s in doc.sents if s.text.strip()]
            out.write(json.dumps({"sentences": sents}, ensure_ascii=False) + "\n")
            documents += 1
            sentences += len(sents)
            single += len(sents) == 1
        if documents == 0:
            raise DataUnavailable(f"corpus {source!r} holds no non-empty document")
    stats = CorpusStats(documents, sentences, single, **counters)
    with atomic_file(stats_file, "w", encoding="utf-8") as out:
        out.write(json.dumps(asdict(stats)))
    return target, stats


def read_prepared(path: str | Path, rank: int = 0, world_size: int = 1) -> list[list[str]]:
    """This rank's shard of a prepared corpus: every ``world_size``-th document from ``rank``."""
    with Path(path).open(encoding="utf-8") as handle:
        return [json.loads(line)["sentences"] for i, line in enumerate(handle) if i % world_size == rank]

"""Pretraining corpora, prepared once into sentence-split documents by a Ray Data job.

Preparation reads the source (``doctune_core.data.sources``) in Ray tasks, normalises whitespace, and
splits every document into sentences with spaCy's rule-based sentencizer (no model needed) in a
pool of actors, one per CPU of the cluster, each building its spaCy pipeline once. It writes
Parquet shards (columns ``sentences``, ``sentence_count``, ``truncated``,
``replaced_invalid_utf8``) into
``<cache>/corpora/<key>/``, keyed by the source's identity, then a ``manifest.json`` with each
shard's row groups and the corpus's ``CorpusStats``; the directory is renamed into place whole, so
a killed preparation never leaves something that passes for a prepared corpus. Where a run is kept
at a storage URI, the writers (on any node) write the shards into the run's files instead, and this
machine fetches them into its cache (``prepare_corpus(..., through=files)``): no node need see the
cache. Otherwise put the cache (``DOCTUNE_CACHE``) on storage every node sees (docs/scaling.md); on a
cluster of several nodes ``check_every_node_sees`` refuses one that is not.

What preparation does to odd input is counted in ``CorpusStats``, never done silently: empty
documents are dropped (kept as rows without sentences, so that they are counted; readers skip
them), bytes that are not UTF-8 are replaced (U+FFFD), documents over ``MAX_DOCUMENT_CHARS`` are
truncated. ``max_documents`` keeps the source's first documents, empty ones included.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.atomic import atomic_file, exclusive_lock
from doctune_core.data.sources import check_source, source_dataset, source_identity
from doctune_core.data.wheels import DataUnavailable, cache_dir
from doctune_core.nodes import live_nodes, on_every_node
from doctune_core.run_files import RunFiles

MAX_DOCUMENT_CHARS = 100_000  # about 20k words; longer documents are truncated (and counted)
PREPARATION_VERSION = 2  # bump when the sentence splitting or the shard format changes
ROWS_PER_GROUP = 256  # a Parquet row group: the unit workers' parts and read windows are made of
ROWS_PER_FILE = 8192
MANIFEST = "manifest.json"
STAGING = ".preparing"  # in a run's files: shards written by the writers, until this machine has fetched them


@dataclass(frozen=True)
class CorpusStats:
    documents: int
    sentences: int
    single_sentence_documents: int
    dropped_empty: int
    truncated: int
    replaced_invalid_utf8: int


@dataclass(frozen=True)
class RowGroup:
    file: str  # shard file name, inside the corpus directory
    index: int  # row group within the file
    rows: int


@dataclass(frozen=True)
class PreparedCorpus:
    """A prepared corpus on disk: its directory, statistics, row groups in corpus order, and a
    digest of the shards' content (the base stage's cache key)."""

    directory: Path
    stats: CorpusStats
    row_groups: tuple[RowGroup, ...]
    digest: str

    @classmethod
    def load(cls, directory: str | Path) -> PreparedCorpus:
        directory = Path(directory)
        manifest = json.loads((directory / MANIFEST).read_text())
        return cls(
            directory,
            CorpusStats(**manifest["stats"]),
            tuple(RowGroup(**group) for group in manifest["row_groups"]),
            manifest["digest"],
        )

    @property
    def rows(self) -> int:
        return sum(group.rows for group in self.row_groups)

    def read_group(self, group: RowGroup) -> list[list[str]]:
        """One row group's documents (a document is its list of sentences), empty ones included."""
        import pyarrow.parquet as pq

        table = pq.ParquetFile(self.directory / group.file).read_row_group(group.index, columns=["sentences"])
        return table.column("sentences").to_pylist()

    def documents(self) -> Iterator[list[str]]:
        """Every non-empty document in corpus order, one row group in memory at a time."""
        for group in self.row_groups:
            yield from (d for d in self.read_group(group) if d)


def prepare_corpus(source: str, max_documents: int | None = None, through: RunFiles | None = None) -> PreparedCorpus:
    """The prepared corpus for ``source``: from the cache, or prepared now by a Ray Data job on the
    running Ray (a local one is started, and stopped after, if none runs). Without ``through`` the
    Train workers read it at this path on their nodes, which must then see the cache. ``through``:
    the files of a run kept at a storage URI, which carry the corpus to the nodes (``trainers.inputs``)
    and, while it is prepared, the writers' shards to this machine, so no node need see the cache."""
    check_source(source)
    target = cache_dir() / "corpora" / source_identity(source, max_documents, PREPARATION_VERSION)
    staged = through is not None and not through.local
    if (target / MANIFEST).exists():
        if not staged:
            check_every_node_sees(target.parent)
        return PreparedCorpus.load(target)
    if not staged:
        check_every_node_sees(target.parent)  # Ray Data's writers, on any node, write the shards here
    with exclusive_lock(target):
        if (target / MANIFEST).exists():  # prepared by the process we waited for
            return PreparedCorpus.load(target)
        _remove_partials(target)
        partial = target.with_name(f"{target.name}.partial-{uuid.uuid4().hex[:8]}")
        try:
            _prepare(source, max_documents, partial, through if staged else None)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        _remove_partials(target)  # again: a killed preparation's Ray workers may outlive it by a moment
    return PreparedCorpus.load(target)


def _remove_partials(target: Path) -> None:
    """Killed preparations' directories of this corpus (the lock says none is running)."""
    for stale in target.parent.glob(f"{target.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)


def check_every_node_sees(directory: Path) -> None:
    """On a Ray cluster of several nodes, raise ``DataUnavailable`` unless every live node sees
    ``directory``: Ray Data's writers and the Train workers open the same path on whichever node
    they run, so a cache on one node's own disk would lose the shards written elsewhere and leave
    workers on other nodes without a corpus. One zero-CPU task per node looks for a file written
    here. Nodes an autoscaler adds later are not asked; mount the storage on every node type."""
    nodes = {node["NodeID"]: node["NodeManagerAddress"] for node in live_nodes()}
    if len(nodes) < 2:
        return
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".seen-by-every-node-{uuid.uuid4().hex[:8]}"
    probe.touch()
    try:
        answers = on_every_node(os.path.exists, str(probe))
    finally:
        probe.unlink(missing_ok=True)
    blind = [address for node, address in nodes.items() if not answers.get(node)]
    if blind:
        raise DataUnavailable(
            f"the corpus cache {directory} is not seen from node {', '.join(blind)} of this Ray cluster: keep "
            "the run in a bucket (--storage s3://...), through which the corpus reaches the nodes, or set "
            "DOCTUNE_CACHE to a directory on storage every node mounts at the same path (docs/scaling.md, "
            "'Corpora at Wikipedia's size')"
        )


def _prepare(source: str, max_documents: int | None, directory: Path, through: RunFiles | None) -> None:
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(logging_level="WARNING", log_to_driver=False)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        if through is None:
            _write_shards(source, max_documents, directory, cpus)
        else:
            _write_shards_through(through, source, max_documents, directory, cpus)
        _write_manifest(source, directory)
    except Exception as err:
        raise _data_error(err) from None
    finally:
        if started_here:
            ray.shutdown()


def _write_shards_through(files: RunFiles, source: str, max_documents: int | None, directory: Path, cpus: int) -> None:
    """``_write_shards`` into the run's files (``STAGING``), then fetched from there into ``directory``
    and removed: the writers' nodes need not see this machine's disk."""
    staging = f"{STAGING}/{directory.name}"
    try:
        _write_shards(source, max_documents, files.path(staging), cpus, files.filesystem)
        for name in files.listing(staging):
            files.download(f"{staging}/{name}", directory / name)
    finally:
        files.delete_dir(staging)


def _write_shards(
    source: str, max_documents: int | None, directory: Path | str, cpus: int, filesystem: object | None = None
) -> None:
    """The sentence-split shards, written by Ray Data's writers into ``directory`` (on ``filesystem``, a
    pyarrow file system; the writers' own disks where None)."""
    import ray.data

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # shards in source order: a reproducible corpus
    context.enable_progress_bars = False
    # small blocks, so that even one large file is split among every sentencizer
    context.target_max_block_size = 1 << 20
    documents = source_dataset(source)
    if max_documents is not None:
        documents = documents.limit(max_documents)
    sentences = documents.map_batches(
        Sentencizer,
        batch_size=128,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=max(1, cpus)),  # one sentencizer per CPU of the cluster
        num_cpus=1,
    )
    sentences.write_parquet(
        str(directory),
        filesystem=filesystem,
        filename_provider=_shard_names(),
        min_rows_per_file=ROWS_PER_FILE,
        row_group_size=ROWS_PER_GROUP,
    )


class Sentencizer:
    """A Ray Data actor: whitespace normalised, truncated to ``MAX_DOCUMENT_CHARS``, split into
    sentences by one spaCy pipeline built when the actor starts."""

    def __init__(self) -> None:
        import spacy

        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        self.nlp.max_length = MAX_DOCUMENT_CHARS + 1

    def __call__(self, batch: dict):
        import pyarrow as pa

        texts = [" ".join(text.split()) for text in batch["text"]]
        truncated = [len(text) > MAX_DOCUMENT_CHARS for text in texts]
        texts = [text[:MAX_DOCUMENT_CHARS] for text in texts]
        sentences = [[s.text.strip() for s in doc.sents if s.text.strip()] for doc in self.nlp.pipe(texts)]
        return pa.table(
            {
                "sentences": pa.array(sentences, type=pa.list_(pa.string())),
                "sentence_count": pa.array([len(s) for s in sentences], type=pa.int32()),
                "truncated": pa.array(truncated, type=pa.bool_()),
                "replaced_invalid_utf8": pa.array(batch["replaced_invalid_utf8"], type=pa.int8()),
            }
        )


def _shard_names():
    from ray.data.datasource import FilenameProvider

    class ShardNames(FilenameProvider):
        """``part-<task index>-...``: sorted by name, the shards are in corpus order."""

        def get_filename_for_task(self, write_uuid: str, task_index: int) -> str:
            return f"part-{task_index:06d}-{write_uuid}.parquet"

    return ShardNames()


def _write_manifest(source: str, directory: Path) -> None:
    """The row groups, statistics and digest, summed over one Ray task per shard, on this node (the
    directory is this machine's)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    summarise = ray.remote(num_cpus=0, scheduling_strategy=here)(_shard_summary)
    summaries = ray.get([summarise.remote(str(path)) for path in sorted(directory.glob("part-*.parquet"))])
    totals = {name: sum(s["counts"][name] for s in summaries) for name in CorpusStats.__dataclass_fields__}
    if totals["documents"] == 0:
        raise DataUnavailable(f"corpus {source!r} holds no non-empty document")
    manifest = {
        "source": source,
        "stats": totals,
        "row_groups": [group for s in summaries for group in s["row_groups"]],
        "digest": hashlib.sha256("".join(s["sha256"] for s in summaries).encode()).hexdigest(),
    }
    with atomic_file(directory / MANIFEST, "w", encoding="utf-8") as out:
        out.write(json.dumps(manifest, indent=1))


def _shard_summary(path: str) -> dict:
    """One shard's row groups, its share of ``CorpusStats`` (from its small columns) and sha256."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    row_groups = [
        {"file": Path(path).name, "index": i, "rows": handle.metadata.row_group(i).num_rows}
        for i in range(handle.metadata.num_row_groups)
    ]
    table = handle.read(columns=["sentence_count", "truncated", "replaced_invalid_utf8"])
    lengths = table.column("sentence_count").to_numpy()
    counts = {
        "documents": int((lengths > 0).sum()),
        "sentences": int(lengths.sum()),
        "single_sentence_documents": int((lengths == 1).sum()),
        "dropped_empty": int((lengths == 0).sum()),
        "truncated": int(pc.sum(table.column("truncated").cast("int64")).as_py() or 0),
        "replaced_invalid_utf8": int(pc.sum(table.column("replaced_invalid_utf8").cast("int64")).as_py() or 0),
    }
    digest = hashlib.sha256()
    with open(path, "rb") as shard:
        for block in iter(lambda: shard.read(1 << 22), b""):
            digest.update(block)
    return {"row_groups": row_groups, "counts": counts, "sha256": digest.hexdigest()}


def _data_error(err: Exception) -> Exception:
    """The ``DataUnavailable`` a Ray task raised, out of the exceptions Ray wraps it in; other
    errors as they are."""
    seen = err
    while seen is not None:
        # Ray's wrapper subclasses the task's exception type but carries Ray's message; the
        # task's own exception is its ``cause``
        cause = getattr(seen, "cause", None)
        if isinstance(cause, BaseException):
            seen = cause
            continue
        if isinstance(seen, DataUnavailable):
            return DataUnavailable(str(seen))
        seen = seen.__cause__ or seen.__context__
    return err

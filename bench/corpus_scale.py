"""Corpora at scale: preparation throughput against CPUs, and a Train worker's memory and first-step
latency against the corpus's size.

    python bench/corpus_scale.py [--sizes 1 10 100] [--prep-size 10] [--cpus 1 2] [--repeats 2]
        [--out bench/out/corpus_scale]

Corpora: ``size`` times the packaged pretraining corpus (3,321 articles), assembled from its
sentences: document ``i`` has as many sentences as packaged article ``i mod 3321`` and draws them
(seeded) from all the corpus's sentences; JSONL files of 10,000 documents under
``OUT/corpora/<size>x/``, made once.

Preparation, at ``--prep-size``: documents per second of

- one process, the baseline: the same reading, clean-up and spaCy sentencizer
  (``doctune_core.data.corpus.Sentencizer``) in one Python process, written to one Parquet file: what
  preparation was before it became a Ray Data job;
- ``prepare_corpus`` (the Ray Data job) on a local Ray of each ``--cpus``, into an empty cache;

each in a fresh process, the order rotating across repeats; Ray's own start is excluded (a search
starts Ray anyway), the Ray Data job's start is included.

Workers, at each of ``--sizes`` (the corpus prepared first, on every CPU, and that time recorded):
one search of ``bench/corpus_scale.yaml`` (two workers, one trial of 4 steps) on it; from its first
round, rank 0's peak resident memory (``worker_peak_rss_mib``) and the time from the worker's start
to its first step's end (``first_step_seconds``). For contrast, the read the workers did before
(their whole part in memory, as lists of sentences) in a fresh process: its resident memory.

Each result is appended to ``OUT/results.jsonl`` as it finishes; a rerun skips what is there and
prints the Markdown tables for bench/RESULTS.md from all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGED_DOCUMENTS = 3321
DOCUMENTS_PER_FILE = 10_000


def assemble_corpus(size: int, out: Path) -> Path:
    """``size`` x the packaged corpus, from its sentences (see the module docstring)."""
    from doctune_core.data import prepare_corpus

    folder = out / "corpora" / f"{size}x"
    if (folder / "done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    articles = list(prepare_corpus("news-articles").documents())
    pool = [sentence for article in articles for sentence in article]
    rng = random.Random(size)
    total = size * len(articles)
    for start in range(0, total, DOCUMENTS_PER_FILE):
        with (folder / f"part-{start // DOCUMENTS_PER_FILE:04d}.jsonl").open("w", encoding="utf-8") as handle:
            for i in range(start, min(start + DOCUMENTS_PER_FILE, total)):
                text = " ".join(rng.choice(pool) for _ in articles[i % len(articles)])
                handle.write(json.dumps({"text": text}) + "\n")
    (folder / "done").write_text(str(total))
    return folder


def child(config: dict) -> dict:
    """One measurement in this (fresh) process."""
    kind = config["kind"]
    if kind == "one_process":
        return prepare_in_one_process(Path(config["source"]), Path(config["target"]))
    if kind == "ray_data":
        import ray

        ray.init(address="local", num_cpus=config["cpus"], include_dashboard=False, log_to_driver=False)
        from doctune_core.data import prepare_corpus

        began = time.perf_counter()
        corpus = prepare_corpus(config["source"])
        return {"seconds": time.perf_counter() - began, "documents": corpus.stats.documents}
    if kind == "whole_part_in_memory":
        from doctune_core.data import PreparedCorpus

        corpus = PreparedCorpus.load(config["corpus"])
        before = rss_mib()
        part = [d for i, d in enumerate(corpus.documents()) if i % 2 == 0]  # rank 0 of 2, as before
        return {"documents": len(part), "rss_mib": rss_mib(), "growth_mib": rss_mib() - before}
    raise ValueError(kind)


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prepare_in_one_process(source: Path, target: Path) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    from doctune_core.data.corpus import Sentencizer

    began = time.perf_counter()
    sentencizer, writer, documents = Sentencizer(), None, 0
    for file in sorted(source.glob("*.jsonl")):
        texts = [json.loads(line)["text"] for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
        for start in range(0, len(texts), 128):
            batch = texts[start : start + 128]
            table = sentencizer({"text": np.array(batch, dtype=object), "replaced_invalid_utf8": np.zeros(len(batch))})
            writer = writer or pq.ParquetWriter(target, table.schema)
            writer.write_table(table)
            documents += len(batch)
    writer.close()
    return {"seconds": time.perf_counter() - began, "documents": documents}


def run_child(config: dict, env: dict | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local", **(env or {})},
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


class Results:
    """``results.jsonl``: one line per finished measurement, keyed so a rerun skips it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lines = path.read_text().splitlines() if path.exists() else []
        self.rows = [json.loads(line) for line in lines if line.strip()]

    def get(self, key: str) -> dict | None:
        return next((row for row in self.rows if row["key"] == key), None)

    def add(self, key: str, row: dict) -> None:
        row = {"key": key, **row, "load": Path("/proc/loadavg").read_text().split()[0]}
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def measure_preparation(args, results: Results, source: Path) -> None:
    modes = ["one_process"] + [f"ray_data_{c}cpu" for c in args.cpus]
    for repeat in range(args.repeats):
        for mode in modes[repeat % len(modes) :] + modes[: repeat % len(modes)]:
            key = f"prep/{args.prep_size}x/{mode}/{repeat}"
            if results.get(key):
                continue
            with tempfile.TemporaryDirectory(dir=args.out) as scratch:
                if mode == "one_process":
                    row = run_child({"kind": mode, "source": str(source), "target": f"{scratch}/out.parquet"})
                else:
                    cpus = int(mode.split("_")[2][:-3])
                    row = run_child(
                        {"kind": "ray_data", "source": str(source), "cpus": cpus}, {"DOCTUNE_CACHE": scratch}
                    )
            results.add(key, {"mode": mode, "size": args.prep_size, **row})


def measure_workers(args, results: Results, size: int, source: Path) -> None:
    key = f"workers/{size}x"
    if results.get(key):
        return
    began = time.perf_counter()
    prepared = run_child({"kind": "ray_data", "source": str(source), "cpus": os.cpu_count()})
    prepare_seconds = time.perf_counter() - began
    from doctune_core.data import prepare_corpus

    corpus_dir = str(prepare_corpus(str(source)).directory)  # from the cache the child filled
    before = run_child({"kind": "whole_part_in_memory", "corpus": corpus_dir})
    spec = write_spec(str(source), args.out / f"corpus_scale_{size}x.yaml")
    run_dir = args.out / "runs" / f"{size}x"
    shutil.rmtree(run_dir, ignore_errors=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "platform.search",
            str(spec),
            "--profile",
            "smoke",
            "--validation-only",
            "--run-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-3000:])
    (result_file,) = run_dir.glob("tune/*/*/result.json")
    first_round = json.loads(result_file.read_text().splitlines()[0])
    row = {
        "size": size,
        "documents": prepared["documents"],
        "prepare_seconds_all_cpus": prepared["seconds"],
        "prepare_wall_seconds": prepare_seconds,
        "worker_peak_rss_mib": first_round["worker_peak_rss_mib"],
        "first_step_seconds": first_round["first_step_seconds"],
        "whole_part_rss_mib": before["rss_mib"],
        "whole_part_growth_mib": before["growth_mib"],
    }
    results.add(key, row)
    shutil.rmtree(run_dir, ignore_errors=True)


def write_spec(source: str, path: Path) -> Path:
    import yaml

    spec = yaml.safe_load((ROOT / "bench" / "corpus_scale.yaml").read_text())
    spec["corpus"]["source"] = source
    path.write_text(yaml.safe_dump(spec))
    return path


def report(args, results: Results) -> None:
    import ray
    import spacy

    print(
        f"\n- machine: {os.cpu_count()} CPUs; ray {ray.__version__}, spacy {spacy.__version__}; "
        f"{time.strftime('%Y-%m-%d')}; load averages (1 min) after each measurement in {args.out}/results.jsonl"
    )
    prep = [row for row in results.rows if row["key"].startswith("prep/")]
    if prep:
        rates = {}
        for row in prep:
            rates.setdefault((row["size"], row["mode"]), []).append(row["documents"] / row["seconds"])
        print("\n| corpus | preparation | runs | documents/s (median) | vs one process |")
        print("|---|---|---:|---:|---:|")
        for (size, mode), values in sorted(
            rates.items(), key=lambda kv: (kv[0][0], kv[0][1] != "one_process", kv[0][1])
        ):
            base = statistics.median(rates[(size, "one_process")]) if (size, "one_process") in rates else None
            ratio = f"{statistics.median(values) / base:.2f}x" if base else "-"
            label = "one process (baseline)" if mode == "one_process" else f"Ray Data, {mode.split('_')[2][:-3]} CPU"
            print(f"| {size}x | {label} | {len(values)} | {statistics.median(values):.0f} | {ratio} |")
    workers = sorted((r for r in results.rows if r["key"].startswith("workers/")), key=lambda r: r["size"])
    if workers:
        print(
            "\n| corpus | documents | prepared in (s, all CPUs) | worker peak RSS (MiB) | first step after (s) "
            "| former read: whole part in memory (MiB, its growth) |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for r in workers:
            print(
                f"| {r['size']}x | {r['documents']} | {r['prepare_seconds_all_cpus']:.0f} | "
                f"{r['worker_peak_rss_mib']:.0f} | {r['first_step_seconds']:.1f} | "
                f"{r['whole_part_rss_mib']:.0f} (+{r['whole_part_growth_mib']:.0f}) |"
            )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--prep-size", type=int, default=10)
    parser.add_argument("--cpus", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "corpus_scale")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = Results(args.out / "results.jsonl")
    if not args.report_only:
        measure_preparation(args, results, assemble_corpus(args.prep_size, args.out))
        for size in args.sizes:
            measure_workers(args, results, size, assemble_corpus(size, args.out))
    report(args, results)


if __name__ == "__main__":
    main()

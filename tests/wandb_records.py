"""Records of a W&B run file (``run-<id>.wandb``), read back without W&B's service.

The file is W&B's record log: a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of
chunks, each a 7-byte header (CRC-32, length, type: full, first, middle, last) and its bytes; a
block's tail shorter than a header is zero padding. Each record is a ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    """Every record of one run file, in the order written."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    ident, _magic, _version = HEADER.unpack_from(data)
    assert ident == b":W&B", f"{path}: not a W&B run file"
    out, pending, offset = [], b"", HEADER.size
    while offset + CHUNK.size <= len(data):
        left = BLOCK - offset % BLOCK
        if left < CHUNK.size:
            offset += left
            continue
        checksum, length, kind = CHUNK.unpack_from(data, offset)
        if length == 0 and kind == 0:  # the block's zero tail
            offset += left
            continue
        payload = data[offset + CHUNK.size : offset + CHUNK.size + length]
        assert zlib.crc32(bytes([kind]) + payload) & 0xFFFFFFFF == checksum, f"{path}: bad chunk at {offset}"
        offset += CHUNK.size + length
        pending = payload if kind in (FULL, FIRST) else pending + payload
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def offline_runs(directory: Path) -> dict[str, dict]:
    """The offline runs W&B wrote under ``directory/wandb``, by display name: each run's id, group,
    job type, config, summary (the last value of each key) and history ((step, values) in the order logged), the names
    of the artifacts it logged and their aliases. A run resumed in a second file is merged into one."""
    runs: dict[str, dict] = {}
    for path in sorted(Path(directory).glob("wandb/offline-run-*/run-*.wandb")):
        run: dict | None = None
        for record in records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                info = record.run
                run = runs.setdefault(
                    info.display_name,
                    {
                        "id": info.run_id,
                        "group": info.run_group,
                        "job_type": info.job_type,
                        "config": {},
                        "summary": {},
                        "history": [],
                        "artifacts": {},
                    },
                )
                run["config"] |= {u.key: json.loads(u.value_json) for u in info.config.update if u.key != "_wandb"}
            elif run is None:
                continue
            elif kind == "config":
                run["config"] |= {u.key: json.loads(u.value_json) for u in record.config.update if u.key != "_wandb"}
            elif kind == "summary":
                for update in record.summary.update:
                    key = update.key or ".".join(update.nested_key)
                    if not key.startswith("_"):
                        run["summary"][key] = json.loads(update.value_json)
            elif kind == "history":
                items = {(i.key or ".".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
                values = {k: v for k, v in items.items() if not k.startswith("_")}
                run["history"].append((items["_step"], values))
            elif kind == "artifact":
                run["artifacts"][record.artifact.name] = {
                    "type": record.artifact.type,
                    "aliases": list(record.artifact.aliases),
                }
    return runs

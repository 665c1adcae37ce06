"""The driver's own records, kept current in the run's storage (``--storage``, ``platform.rundir.storage``).

The trials and Ray Tune write their files in the storage themselves (``trials/``, ``tune/``). The
driver writes its records in its run directory (``search.json``, the Optuna journal, the baselines'
and references' scores, the leaderboard, the report, ``best/``, the timings, the trackers' offline
files) and ``RunRecords.sync`` uploads what changed: when the search starts; after every trial event
Tune reports, once the trackers have logged it (``UploadRecords``: so the journal and the trackers'
state in the storage keep up with Tune's experiment, which Tune itself saves there); every few
seconds between events, for what a tracker writes after it logged (W&B writes its offline run
file a second later); and once more when the search ends, however it ends. A record the run
directory no longer holds is deleted from the storage; nothing the trials or Tune wrote is touched.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ray import tune

from platform.rundir.storage import RunStorage, is_driver_record

log = logging.getLogger(f"doctune.{__name__}")

RECORDS_EVERY_S = 3.0  # between trial events, while Tune runs: what a killed driver's records may lack


class RunRecords:
    """Uploads the driver's records in ``run_dir`` to ``storage``: each ``sync`` sends what is new or
    changed since the last (by size and modification time) and deletes what the run directory no
    longer holds. The driver is their only writer."""

    def __init__(self, storage: RunStorage, run_dir: Path) -> None:
        self.storage, self.run_dir = storage, run_dir
        self.behind = False  # the last sync failed: the storage lacks some of the driver's records
        self._sent: dict[str, tuple[int, int]] | None = None  # what the storage holds: its stamp (size, mtime)
        self._lock = threading.Lock()

    def _local_files(self) -> tuple[dict[str, tuple[int, int]], bool]:
        """The run directory's records, with their stamps, and whether the walk saw all of it (a
        directory replaced while walked is not seen; what was not seen is not deleted)."""
        files, errors = {}, []
        for directory, _, names in os.walk(self.run_dir, onerror=errors.append):
            for name in names:
                path = Path(directory) / name
                relative = path.relative_to(self.run_dir).as_posix()
                if not is_driver_record(relative) or path.is_symlink():  # W&B links its service's own log
                    continue
                try:
                    stat = path.stat()
                except FileNotFoundError:  # removed while we looked
                    continue
                files[relative] = (stat.st_size, stat.st_mtime_ns)
        return files, not errors

    def sync(self) -> tuple[int, int]:
        """Bring the storage's records up to date now; (files uploaded, files deleted)."""
        with self._lock:
            if self._sent is None:  # the storage as found: a record fetched from it has its stamp
                self._sent = {f: stamp for f, stamp in self.storage.stamps().items() if is_driver_record(f)}
            local, whole = self._local_files()
            uploaded = 0
            for relative, stamp in local.items():
                if self._sent.get(relative) == stamp:
                    continue
                try:
                    self.storage.upload(self.run_dir / relative, relative)
                except FileNotFoundError:  # removed while we copied: deleted from the storage below, next time
                    continue
                self._sent[relative] = stamp
                uploaded += 1
            gone = [relative for relative in self._sent if relative not in local] if whole else []
            for relative in gone:
                self.storage.delete_file(relative)
                del self._sent[relative]
            return uploaded, len(gone)

    def try_sync(self) -> None:
        """``sync``, a failure said rather than raised (the next sync tries again; the last decides)."""
        try:
            self.sync()
        except Exception as err:
            log.warning(f"doctune: warning: uploading the run's records to {self.storage.uri}: {err}")

    @contextmanager
    def kept_current(self) -> Iterator[None]:
        """Sync as the block starts, after Tune's trial events while it runs (``UploadRecords``), and
        once more as it ends, whatever ends it; ``behind`` says whether that last one failed (the run
        directory is whole either way)."""
        global _kept
        self.try_sync()
        _kept = self
        try:
            yield
        finally:
            _kept = None
            began = time.perf_counter()
            try:
                uploaded, deleted = self.sync()
            except Exception as err:  # said, never raised over what ended the block
                self.behind = True
                log.error(
                    f"doctune: error: the run's records could not be uploaded to {self.storage.uri} ({err}); "
                    f"{self.run_dir} is whole: run the same command with --resume to upload them",
                )
            else:
                self.behind = False
                log.info(
                    f"doctune: run records uploaded to {self.storage.uri} ({uploaded} file(s) uploaded, {deleted} "
                    f"deleted, {time.perf_counter() - began:.1f} s)",
                )


_kept: RunRecords | None = None  # the records a search of this process keeps current (``kept_current``)


class UploadRecords(tune.Callback):
    """Uploads the driver's records (those a running ``kept_current`` block keeps; none without a
    storage) after every trial event Tune reports (a round, an end, an error), and every
    ``RECORDS_EVERY_S`` between them. It holds no records itself: Tune saves its callbacks with the
    experiment, and a resumed search, perhaps in another directory, keeps its own. Give it after the
    trackers' callback: Tune calls its callbacks in order, so a round's upload holds what the
    trackers recorded of it."""

    def __init__(self) -> None:
        self._last = 0.0

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        if time.monotonic() - self._last >= RECORDS_EVERY_S:
            self._sync()

    def _sync(self) -> None:
        self._last = time.monotonic()
        if _kept is not None:
            _kept.try_sync()

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info) -> None:
        self._sync()

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        self._sync()

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        self._sync()

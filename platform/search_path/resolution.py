"""One search, resolved in one function (``resolved_search``), each step once, in this order, from
the request (``platform.search_path.request``: the spec read, the run directory checked, a resumed
run's record and saved state read):

1. the cluster chosen (``platform.cluster.ray_cluster.ClusterChoice``): a Ray of its own, whose
   resources are this machine's, or a running cluster;
2. ``settle`` (``platform.search_path.settling``): the profile (``--profile``, else the one a resumed
   run started with, else ``full`` on a cluster with GPUs and ``local`` without), the spec validated
   for it and held to the resumed run's record (``platform.search_path.request``), its ``auto``
   resources fitted to the cluster and the whole checked to fit; for a Ray of its own this and the
   inputs' check run before anything starts, so bad input starts nothing;
3. Ray started or joined;
4. the inputs prepared (``platform.search_path.inputs``): the corpus, the base encoder with its
   head and conversion; a base the spec trains (``base:``) is named here;
5. ``resolve`` (``platform.search_path.plans``): the ``ResolvedSearch`` that ``--dry-run`` prints,
   ``search.json`` records and the search runs; past it nothing reads the spec;
6. the run recorded: its directory made and ``search.json`` written (not for a dry run), and, where
   it is kept at a storage URI, the driver's records kept current there from here on;
7. a base the spec trains trained now that the run is recorded (so ``--resume`` continues it), and
   the inputs shared through the run's storage where its nodes may not see this machine's cache.

Ray is shut down when the ``with`` block ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace

from doctune_core.run_layout import SEARCH_RECORD
from platform.cluster.ray_cluster import ClusterChoice
from platform.rundir.layout import write_atomic
from platform.rundir.records import RunRecords
from platform.rundir.timings import PhaseClock
from platform.search_path.inputs import InputsPlan, check_inputs, prepare_inputs, share_through_storage
from platform.search_path.plans import ResolvedSearch, resolve
from platform.search_path.request import SearchRequest
from platform.search_path.settling import settle

log = logging.getLogger(f"doctune.{__name__}")


@dataclass
class SearchUnderWay:
    """A resolved search with Ray up, and, where the run is kept at a storage URI, its driver's
    records (``records.behind`` once the block ends: the storage lacks some of them)."""

    resolved: ResolvedSearch
    records: RunRecords | None = None

    @property
    def records_behind(self) -> bool:
        return self.records is not None and self.records.behind


@contextmanager
def resolved_search(request: SearchRequest, *, dry_run: bool, clock: PhaseClock) -> Iterator[SearchUnderWay]:
    """The search ``request`` asks for, resolved in the order the module says, with Ray up inside
    the block. A dry run stops after step 5: nothing is recorded, trained or shared."""
    provisional = request.provisional_spec()
    where = ClusterChoice.for_address(provisional.address)
    known = where.known_resources()
    settled = settle(request, known) if known else None
    check_inputs(InputsPlan.of(settled.spec if settled else provisional))

    import ray

    with clock.phase("ray start"):
        may_wait = request.resume or provisional.search.scheduler.pbt is not None
        cluster, growth = where.join(trials_may_wait=may_wait, log_to_driver=not dry_run)
    try:
        settled = settled or settle(request, cluster)
        inputs = InputsPlan.of(settled.spec)
        with clock.phase("inputs"):  # the corpus is prepared by a Ray Data job the first time
            prepared = prepare_inputs(inputs, plan_only=dry_run, storage=request.storage)
        run_dir = request.run_dir
        resolved = resolve(
            settled, prepared, spec_path=request.spec_path, run_dir=run_dir, cluster=cluster, growth=growth
        )
        if request.storage:
            resolved = resolved.stored_at(request.storage.uri)
        if dry_run:
            yield SearchUnderWay(resolved)
            return
        if not request.resume:
            run_dir.mkdir(parents=True)
            write_atomic(run_dir / SEARCH_RECORD, json.dumps(resolved.summary(), indent=2, default=str))
        records = RunRecords(request.storage, run_dir) if request.storage else None
        with records.kept_current() if records else nullcontext():  # whatever ends the search
            if inputs.base is not None:
                with clock.phase("base stage"):
                    files = resolved.train_plan.run_files
                    built = prepare_inputs(inputs, build_base_in=run_dir, storage=files)
                resolved = resolved.with_base(built)
            if resolved.storage is not None:  # its nodes may not see this machine's cache
                with clock.phase("inputs shared"):
                    resolved = replace(resolved, train_plan=share_through_storage(resolved.train_plan))
            yield SearchUnderWay(resolved, records)
    finally:
        ray.shutdown()

"""A run and where it is kept: the run directory's names and checks (``layout``), a run at a
storage URI (``storage``) with the driver's records kept current there (``records``), what an
ended trial keeps (``retention``) and where the wall time went (``timings``)."""

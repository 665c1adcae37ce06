"""What runs inside a Ray Train worker: encoders, corpora, positive-pair builders, losses and the
per-worker training loop. Imported by Ray workers, so nothing here imports ``platform``."""

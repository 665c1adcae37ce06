"""Evaluation: tasks declared with their metadata, metrics, and the Ray actor pool that scores
every checkpoint a trial saves."""

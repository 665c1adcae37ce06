"""doctune: hyperparameter searches for contrastive pretraining of document encoders.

From Python (in the calling process)::

    import doctune
    rows = doctune.search("docsplit_long", profile="smoke", on_trial=lambda trial, result: print(trial))
    print(rows[0].trial, rows[0].objective)
    scores = doctune.evaluate("all-minilm-l6-v2", ["news-title-retrieval"]).scores

From a shell: ``doctune search|study|report|evaluate`` (``doctune.cli``); the driver itself is the
package ``platform`` (``python -m platform.search``).
"""

from __future__ import annotations

from doctune.api import BadInput, SearchFailed, evaluate, load_spec, search

__all__ = ["BadInput", "SearchFailed", "evaluate", "load_spec", "search"]

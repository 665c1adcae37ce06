"""How much there is to find in a table, whatever the search."""

from __future__ import annotations

import numpy as np

from bench.efficiency.table import Table


def diagnostics(table: Table) -> dict[str, float]:
    """How much there is to find in the table, on the last round: the spread of the validation
    objective over configurations, how well the validation ranking predicts the test ranking
    (Spearman), and the test objective of the best-validation configuration against the best test
    objective any configuration has (the most a search could report). A rank correlation near 0
    means the validation objective is mostly noise, and no sampler can beat random search."""
    from scipy.stats import spearmanr

    val, test = table.val[:, -1], table.test[:, -1]
    ok = np.isfinite(val) & np.isfinite(test)
    val, test = val[ok], test[ok]
    return {
        "configurations": int(ok.sum()),
        "val_range": float(val.max() - val.min()),
        "val_std": float(val.std(ddof=1)),
        "spearman_val_test": float(spearmanr(val, test).statistic),
        "test_of_best_val": float(test[np.argmax(val)]),
        "best_test": float(test.max()),
        "median_test": float(np.median(test)),
    }

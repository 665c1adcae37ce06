"""Is a gain beyond noise, and do a search's trials differ beyond noise?

Two questions, both answered from the items every encoder was scored on:

- ``paired_gain``: the difference between two encoders and its interval (below);
- ``spread_test``: whether the spread of several encoders' objectives (a search's trials) is more
  than scoring noise alone would give them (``Spread``), from ``joint_resamples``.

**A gain.**
Two encoders scored on the same part of the same tasks (``Task.outcomes``: one row per query,
document or pair) differ by the (weighted) difference of their main scores. Its interval is a
paired t interval whose variance adds, per task, the items' and (a few-shot probe's) the draws'
share, and the training seeds' where they were measured (``search.confirm_seeds``), with
Welch-Satterthwaite degrees of freedom (Satterthwaite, *Biometrics Bulletin* 2(6), 1946):

- items, a continuous mean over items (nDCG@10 per query): the paired differences' variance over n,
  with pseudo-items (below); a score that is not a mean over items (a probe's macro-F1 over its
  draws), the same of the rows' paired influence values (the delta method, ``Outcomes.influence``),
  else by the paired bootstrap widened by n / (n - 1); n - 1 degrees of freedom;
- items, a binary part (acc@1 per question, ``Outcomes.binary``): the variance of a difference of
  paired proportions were the gain the one being tested, Tango's (``paired_proportions_variance``),
  and the interval every gain g with |difference - g| <= t * se(g) (``score_interval``: a test
  inverted, as Wilson's interval for one proportion). At the observed gain it is the plain
  variance; where the rows never or seldom disagreed, a gain of g would have disagreed on about
  |g| of the items, and the interval keeps the gains such a part cannot rule out. In a gain over
  several parts each binary part's gain moves with the whole one's, by the same amount;
- pseudo-items, for a gain on one continuous part (a task, a length bucket): ``PSEUDO_ITEMS`` items
  on each side at plus and minus the root mean square of the differences that are not 0 (1 where
  none is): Bonett & Price's adjusted variance of paired proportions (*The American Statistician*
  66(2), 2012: one pseudo-item in each discordant cell) on the part's own scale, for a part near its
  ceiling whose differences are as sparse as a binary part's. A gain over several parts takes none:
  its other parts give it width;
- draws: the sample variance of the per-draw differences (the same draws for both) over m, less
  the part of it each draw's own item noise makes (already in the items' term); its degrees of
  freedom Satterthwaite's for a difference of mean squares, (m - 1) (net / gross)^2, the whole
  between-draw variance's uncertainty carried by what is left of it: with 3 draws the net term is
  often small and its m - 1 alone made the interval too narrow (R8 at the local profile's sizes
  covered 90-93%, bench/RESULTS.md); where the net term comes out at or below 0 it keeps that
  uncertainty, so the interval does not jump narrower there;
- seeds: the trained row's score is one training run's; the seeds' variance, estimated from k runs,
  with k - 1 degrees of freedom (2 runs give 1: a wide interval, as it should be), and the interval
  never narrower than the seeds' own t interval (t at k - 1 times their spread): Satterthwaite's
  degrees of freedom for a term estimated from 2 or 3 runs are too many whenever its sample variance
  comes out small (bench/seed_mean_calibration.py). Without measured seeds the gain says "seed
  noise not included": it is this run's gain, not the configuration's.

A part too small to decide (``too_few_to_decide``: a rule fixed before the interval was
calibrated) prints no interval but "too few items to decide". The interval's coverage of a known
gain at the sizes the profiles ship, item outcomes resampled from recorded runs and the seeds'
spread estimated from 2 or 3 runs, beside the percentile bootstrap, BCa, the Bayesian bootstrap
and an exact McNemar interval, is ``bench/gain_calibration.py`` (bench/RESULTS.md,
docs/decisions/gain-intervals.md).

**A spread.** The trials of one search are scored on the same validation items, so their scores
share the items' noise; what separates them is each trial's own part of it. ``joint_resamples``
draws the items (and, separately, a few-shot probe's draws) with replacement, the same draw for
every trial, and recomputes every trial's objective. Centred on the observed values, each resample is what
the trials would look like if they did not differ at all: the spread of ``resampled - observed``
across trials is a draw of the spread that scoring noise alone produces (the bootstrap's null
distribution, Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 16). The observed
spread is beyond noise when fewer than 5% of those null spreads reach it. Where the training
seeds' spread was measured (``search.confirm_seeds``) it is added to the null as independent
noise per trial, since a trial's configuration is scored through one training run.

Its modules: ``rules`` (when a part is too small to decide; the constants every verdict shares),
``gain`` (a gain's record), ``variance`` (its variance components and intervals), ``paired`` (a gain
on shared items), ``seeds`` (a configuration's over its training runs), ``spread`` (a search's
trials). Here, beside the scores it reads (``doctune_core.outcomes``), so that the results side,
the public API and the benchmarks read one copy, and the evaluators only score.
"""

from __future__ import annotations

from doctune_core.noise.gain import Gain, SeedSpread, TaskGain
from doctune_core.noise.paired import disagreeing_items, items_agreement, len_items, paired_gain, task_gain
from doctune_core.noise.rules import (
    BOOTSTRAP_ROUNDS,
    DECIDED_MARGIN,
    DECIDED_WEIGHT,
    FEW_DISAGREED,
    LEVEL,
    MIN_DRAWS,
    MIN_ITEMS,
    NO_WIDTH,
    PSEUDO_ITEMS,
    check_paired,
    decided_share,
    too_few_to_decide,
    undecided_part,
)
from doctune_core.noise.seeds import seed_mean_gain
from doctune_core.noise.spread import POWER, Spread, items_needed, items_to_tell, joint_resamples, spread_test
from doctune_core.noise.variance import (
    draw_variance,
    item_variance,
    paired_proportions_variance,
    score_interval,
    t_interval,
    t_quantile,
)

__all__ = [
    "BOOTSTRAP_ROUNDS",
    "DECIDED_MARGIN",
    "DECIDED_WEIGHT",
    "FEW_DISAGREED",
    "LEVEL",
    "MIN_DRAWS",
    "MIN_ITEMS",
    "NO_WIDTH",
    "POWER",
    "PSEUDO_ITEMS",
    "Gain",
    "SeedSpread",
    "Spread",
    "TaskGain",
    "check_paired",
    "decided_share",
    "disagreeing_items",
    "draw_variance",
    "item_variance",
    "items_agreement",
    "items_needed",
    "items_to_tell",
    "joint_resamples",
    "len_items",
    "paired_gain",
    "paired_proportions_variance",
    "score_interval",
    "seed_mean_gain",
    "spread_test",
    "t_interval",
    "t_quantile",
    "task_gain",
    "too_few_to_decide",
    "undecided_part",
]

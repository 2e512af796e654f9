"""Evidence: what each number in the book is, and prose generated from it.

The book reruns on any machine, so a sentence about results that is typed
once is false somewhere. This package is the one mechanism every chapter uses
to keep its numbers honest:

* :mod:`.roles` -- every result carries a role: ``measured`` (on a machine or
  a real kernel), ``fitted`` (calibrated to a published figure: never evidence
  for the model), ``predicted`` (computed without the figure it is compared
  with), ``assumed`` (a parameter with a stated source or range), and
  ``published`` (a patch's own figure, quoted);
* :mod:`.calibration` -- a :class:`Calibration` records which published
  targets a model was fitted to; comparing a "prediction" with one of them
  raises :class:`FittedTargetError`, and comparisons are labelled
  ``fit quality`` or ``held-out test`` accordingly;
* :mod:`.spread` -- headlines over seeds (median and range) and over the
  range of each assumed parameter;
* :mod:`.prose` -- Markdown sentences rendered from computed values (scope
  phrases such as "on 41 of 53 machines"), and :func:`claim`, which fails
  the build when a property the text states stops holding;
* :mod:`.findings` -- results a chapter hands to the reviewer's guide, which
  the build generates from the executed chapters;
* :mod:`.typed` -- the scanner that finds result figures typed by hand in
  Markdown.

Welch's comparison of two published means stays in
:mod:`numalab.evidence.welch` and is re-exported here.
"""

from .welch import Difference, difference
from .calibration import Calibration, Comparison, FittedTargetError
from .findings import (Finding, collect_findings, finding, kernel_modelled, measured_on,
                       render_guide)
from .prose import ClaimFailed, claim, count_of, md, plural, pct, say, share_phrase
from .roles import ROLES, Value, role_table
from .spread import Spread, over_range, over_seeds

__all__ = ["ROLES", "Value", "role_table", "Calibration", "Comparison", "FittedTargetError",
           "Spread", "over_seeds", "over_range", "md", "say", "claim", "ClaimFailed",
           "count_of", "share_phrase", "plural", "pct", "Finding", "finding", "kernel_modelled",
           "measured_on",
           "collect_findings", "render_guide", "Difference", "difference"]

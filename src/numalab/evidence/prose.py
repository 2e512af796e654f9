"""Result sentences generated from computed values, and checked claims.

A sentence about results is built from the values in the build, so it says
what this run found on these datasets:

>>> count_of(41, 53, "machine")
'41 of 53 machines'
>>> count_of(53, 53, "machine"), count_of(0, 53, "machine"), count_of(1, 1, "machine")
('all 53 machines', 'none of the 53 machines', 'the 1 machine')
>>> say("the gain is {g} on {where}", g=3.771, where=count_of(2, 5, "seed"))
'the gain is 3.77 on 2 of 5 seeds'
>>> pct(0.0377)
'3.77 %'

A property of the kernel code that the text states unconditionally is
checked right after the computation; when it stops holding, the build fails
with the sentence quoted:

>>> claim(True, "each hop mask contains the previous one")
>>> claim(False, "each hop mask contains the previous one", detail="node 2, hop 1")
Traceback (most recent call last):
...
numalab.evidence.prose.ClaimFailed: the text says "each hop mask contains the previous one", and this build's results contradict it (node 2, hop 1)
"""

from __future__ import annotations

from .roles import fmt

__all__ = ["md", "say", "count_of", "share_phrase", "plural", "pct", "claim", "ClaimFailed",
           "compare_word"]


class ClaimFailed(AssertionError):
    """A sentence of the book no longer holds for this build's results."""


def plural(n: int, word: str, words: str | None = None) -> str:
    """``word`` or its plural for ``n``.

    >>> plural(1, "machine"), plural(2, "machine"), plural(2, "patch", "patches")
    ('machine', 'machines', 'patches')
    """
    return word if n == 1 else (words or word + "s")


def count_of(k: int, n: int, word: str, words: str | None = None) -> str:
    """The scope of a statement about data: "41 of 53 machines", "all 53
    machines", "none of the 53 machines"."""
    w = plural(n, word, words)
    if n == 1 and k == 1:
        return f"the 1 {w}"
    if k == n:
        return f"all {n} {w}"
    if k == 0:
        return f"none of the {n} {w}"
    return f"{k} of {n} {w}"


def share_phrase(k: int, n: int, word: str, words: str | None = None) -> str:
    """``count_of`` with "on": "on 41 of 53 machines"."""
    return "on " + count_of(k, n, word, words)


#: Below this a fraction is floating-point noise (the difference of two
#: equal sums computed in another order), printed as 0.
NOISE = 1e-12


def pct(fraction: float, digits: int = 3) -> str:
    """A fraction as a percentage with ``digits`` significant digits; a
    fraction within :data:`NOISE` of zero is 0.

    >>> pct(0.0398), pct(3.3e-16), pct(-0.000311)
    ('3.98 %', '0 %', '-0.0311 %')
    """
    if abs(fraction) < NOISE:
        fraction = 0
    return f"{fmt(100 * fraction, digits)} %"


def compare_word(a: float, b: float, more: str = "more", less: str = "less",
                 same: str = "as much", rel_tol: float = 1e-9) -> str:
    """The word comparing ``a`` with ``b``.

    >>> compare_word(2, 1), compare_word(1, 2, "faster", "slower"), compare_word(1, 1)
    ('more', 'slower', 'as much')
    """
    if abs(a - b) <= rel_tol * max(abs(a), abs(b), 1e-300):
        return same
    return more if a > b else less


def _fmt_value(v) -> str:
    if isinstance(v, float):
        return fmt(v)
    return str(v)


def say(template: str, **values) -> str:
    """``template.format(**values)`` with floats given 3 significant digits."""
    return template.format(**{k: _fmt_value(v) for k, v in values.items()})


def md(text: str):
    """A Markdown output (shown as text in JupyterLab and in the book)."""
    from IPython.display import Markdown
    return Markdown(text)


def claim(holds: bool, sentence: str, detail: str = "") -> None:
    """Fail (raise :class:`ClaimFailed`) when ``holds`` is false, quoting the
    sentence of the book that the result contradicts."""
    if not holds:
        extra = f" ({detail})" if detail else ""
        raise ClaimFailed(f'the text says "{sentence}", and this build\'s results '
                          f"contradict it{extra}")

"""``-k``-like expressions over gate ids: words (case-insensitive substrings), ``and``, ``or``, ``not``, parentheses.

As pytest's ``-k`` reads a test name, without importing pytest (the history reads stored ids, outside a run).
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["ExpressionError", "matcher"]

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class ExpressionError(ValueError):
    """A malformed expression (the message names it and where it went wrong)."""


def matcher(expr: str | None) -> Callable[[str], bool]:
    """A predicate over gate ids; an empty expression matches every id.

    Example:
        >>> m = matcher("coverage and (africa or europe) and not country")
        >>> [m(g) for g in ("test_region_coverage[s-object-africa]", "test_region_coverage[s-object_in_country-africa]",
        ...                 "test_region_precision[s-object-europe]")]
        [True, False, False]
    """
    if not expr or not expr.strip():
        return lambda name: True
    tokens = _TOKEN.findall(expr)
    pos = 0

    def fail(why: str):
        raise ExpressionError(f"-k {expr!r}: {why}")

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def disjunction():
        parts = [conjunction()]
        while peek() == "or":
            take()
            parts.append(conjunction())
        return lambda s: any(p(s) for p in parts)

    def conjunction():
        parts = [negation()]
        while peek() == "and":
            take()
            parts.append(negation())
        return lambda s: all(p(s) for p in parts)

    def negation():
        if peek() == "not":
            take()
            inner = negation()
            return lambda s: not inner(s)
        return atom()

    def atom():
        tok = peek()
        if tok is None:
            fail("ends where a word was expected")
        take()
        if tok == "(":
            inner = disjunction()
            if peek() != ")":
                fail("a '(' is not closed")
            take()
            return inner
        if tok in (")", "and", "or"):
            fail(f"unexpected {tok!r}")
        word = tok.lower()
        return lambda s: word in s.lower()

    predicate = disjunction()
    if pos != len(tokens):
        fail(f"unexpected {tokens[pos]!r}")
    return predicate

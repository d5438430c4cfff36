"""Hypothesis strategies over the same generators (`families.py`): `valid_cases()`,
`invalid_cases()`, `mutation_cases()`, `cases(family)`."""
from __future__ import annotations

from hypothesis import strategies as st

from .draw import HypothesisDraw
from .families import FAMILIES, VALID, generate


@st.composite
def cases(draw, family: str | None = None, families=FAMILIES):
    """A Case of `family` (or of one of `families`)."""
    fam = family or draw(st.sampled_from(list(families)))
    seed = draw(st.integers(0, 10 ** 9))
    return generate(HypothesisDraw(draw), fam, f"h{seed}")


def valid_cases():
    return cases(families=tuple(VALID))


def invalid_cases():
    return cases("invalid")


def mutation_cases():
    return cases("mutation")

"""Where a generator's choices come from: a seeded `random.Random` (the long profile, replayable
from `family:seed`) or Hypothesis's `draw` (the strategies in `strategies.py`).

Generators are written once against `Draw` (int, choice, boolean, real), so the same code is a
Hypothesis strategy and a seeded generator."""
from __future__ import annotations

import random


TRICKY = (1, 2, 3, 15, 16, 17, 31, 33, 47, 48, 49, 63, 65, 95, 97, 127, 129, 255, 257)


class Draw:
    """Choices for a generator. Subclasses implement the four primitives."""

    def int(self, lo: int, hi: int) -> int:  # inclusive bounds
        raise NotImplementedError

    def choice(self, options):
        raise NotImplementedError

    def boolean(self, p: float = 0.5) -> bool:
        raise NotImplementedError

    def real(self, lo: float, hi: float) -> float:
        raise NotImplementedError

    def dim(self, lo: int, hi: int, p: float = 0.3) -> int:
        """A size in [lo, hi], often an awkward one (1, 2^k +- 1: tails of every tile and of
        16-element vector runs)."""
        tricky = [v for v in TRICKY if lo <= v <= hi]
        if tricky and self.boolean(p):
            return self.choice(tricky)
        return self.int(lo, hi)

    def weighted(self, options, weights):
        """One of `options`, more likely the heavier (a small helper over `int`)."""
        total = sum(weights)
        r = self.int(0, total - 1)
        for opt, w in zip(options, weights):
            if r < w:
                return opt
            r -= w
        return options[-1]


class RandomDraw(Draw):
    """Seeded choices: `RandomDraw("gemm:17")` always makes the same case."""

    def __init__(self, seed):
        self.rng = random.Random(str(seed))

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, options):
        options = list(options)
        return options[self.rng.randrange(len(options))]

    def boolean(self, p=0.5):
        return self.rng.random() < p

    def real(self, lo, hi):
        return round(self.rng.uniform(lo, hi), 3)


class HypothesisDraw(Draw):
    """Choices drawn through Hypothesis (shrinks towards the first option and small ints)."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self._draw, self._st = draw, st

    def int(self, lo, hi):
        return self._draw(self._st.integers(lo, hi))

    def choice(self, options):
        return self._draw(self._st.sampled_from(list(options)))

    def boolean(self, p=0.5):
        return self._draw(self._st.booleans())

    def real(self, lo, hi):
        return round(self._draw(self._st.floats(lo, hi, allow_nan=False)), 3)

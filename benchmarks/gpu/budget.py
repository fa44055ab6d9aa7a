"""The check's time budget: measurements run while their predicted cost fits in the time left, in the order given
(small sizes first), and the others are recorded as skipped with their prediction."""

from __future__ import annotations

import time


class Budget:
    """A deadline and a cost model: each kind of measurement scales linearly in its work (n d, n^2, n^2 d, pairs)
    from the last one measured; the first of a kind (the smallest size) runs unpredicted."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()
        self.skipped: list[dict] = []
        self._rate: dict[str, float] = {}  # kind -> seconds per unit of work

    def spent(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.seconds - self.spent()

    def predict(self, kind: str, work: float) -> float | None:
        """Seconds one run of `kind` on `work` is expected to take; None before the first was measured."""
        rate = self._rate.get(kind)
        return None if rate is None else rate * work

    def learn(self, kind: str, work: float, seconds: float) -> None:
        self._rate[kind] = seconds / max(work, 1.0)

    def allows(self, what: str, predicted_cost: float | None, keep: float = 0.0) -> bool:
        """Whether a step costing `predicted_cost` seconds (None: unknown, allowed) fits, leaving `keep` seconds for
        the steps after it; a refused step is recorded in `skipped`."""
        if predicted_cost is None or predicted_cost <= self.left() - keep:
            return True
        self.skipped.append({"what": what, "predicted_seconds": predicted_cost, "left_seconds": max(0.0, self.left())})
        return False

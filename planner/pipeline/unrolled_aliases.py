"""Thread-local aliasing (docs/design.md, Reuse hazard, rule (b)) on the unrolled program of a
request with loops, branches or ranges: the rule applies per iteration.

A hazard (a piece followed by a piece on the same bytes, ``planner.pipeline.program.Hazards``)
needs no barrier when the owner maps of the two pieces' ranges agree on the bytes they share
at the placement (``planner.core.aliasing.RangeOwners``). Each range's map is taken over all
of its accesses, which run alike in every iteration, so the same test covers the pair inside
one iteration and the pair across the back edge (the later tensor of iteration i, the first
of iteration i + 1): a back-edge reuse goes without a barrier only when ownership holds for
the next iteration too, else it keeps its barrier.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core.aliasing import ALIAS_MAX_BUFFERS, RangeOwners
from planner.core.models import PlanRequest
from planner.pipeline.program import Program

__all__ = ["PieceAliases"]

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class PieceAliases:
    """Which hazards of a program rule (b) lets go without a barrier."""

    def __init__(self, req: PlanRequest, prog: Program, sizes: list[int]) -> None:
        h = prog.hazards
        opaque = frozenset(i for i, b in enumerate(req.buffers) if sizes[i] != b.size)
        self.owners = RangeOwners(req, opaque)
        self.prog = prog
        patterned = np.asarray(self.owners.patterned, dtype=np.bool_)
        self.active = bool(patterned.any()) and len(req.buffers) <= ALIAS_MAX_BUFFERS
        self.eligible: Mask = (
            patterned[h.a] & patterned[h.b] if self.active else np.zeros(h.n, dtype=np.bool_)
        )
        self._same: Mask | None = None

    def same_offset(self) -> Mask:
        """Per hazard: whether rule (b) holds with both pieces at one offset (exact for a
        buffer's own pieces, which always are)."""
        if self._same is None:
            self._same = self.holds(self.eligible, None)
        return self._same

    def holds(self, mask: Mask, offsets: I64 | None) -> Mask:
        """Per hazard of ``mask``: whether rule (b) holds at the placement ``offsets`` (None:
        both pieces at one offset)."""
        h = self.prog.hazards
        out = np.zeros(h.n, dtype=np.bool_)
        idx = np.flatnonzero(mask & self.eligible)
        if not idx.size:
            return out
        a, b = h.a[idx], h.b[idx]
        shift = np.zeros(idx.size, dtype=np.int64) if offsets is None else offsets[b] - offsets[a]
        keys = np.stack([a, h.pa[idx], b, h.pb[idx], shift], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        agree = self.owners.agree
        verdict = np.asarray(
            [agree(x, px, y, py, d) for x, px, y, py, d in unique.tolist()], dtype=np.bool_
        )
        out[idx] = verdict[inverse.reshape(-1)]
        return out

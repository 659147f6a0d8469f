"""Multi-turn order: which earlier request each request must wait for (docs/replay.md, "Multi-turn").

A turn is sent only after the previous turn of its session finished. The predecessor is the request
of the same session with the next lower (turn, offset); requests without a session wait for nothing.
Computed once before t0, as indices into the schedule-ordered request list.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.prepared_request import PreparedRequest


def session_predecessors(requests: Sequence[PreparedRequest]) -> list[int | None]:
    """For each request, the index of the request it must wait for, or None."""
    by_session: dict[str, list[int]] = {}
    for i, request in enumerate(requests):
        if request.session_id is not None:
            by_session.setdefault(request.session_id, []).append(i)
    predecessors: list[int | None] = [None] * len(requests)
    for indices in by_session.values():
        # A missing turn number orders by schedule (offset), after numbered turns of equal rank.
        indices.sort(
            key=lambda i: (requests[i].turn if requests[i].turn is not None else 1 << 31, requests[i].offset_s, i)
        )
        for before, after in zip(indices, indices[1:]):
            predecessors[after] = before
    return predecessors

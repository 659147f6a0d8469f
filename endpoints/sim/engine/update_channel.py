"""A one-consumer channel from the engine to a request's HTTP handler.

asyncio.Queue does more than this needs (maxsize, getter lists, task accounting); streaming every
token of a thousand requests makes its overhead the twin's limit, so this keeps one deque and at
most one waiting future.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


class UpdateChannel:
    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self._items.popleft()

    def drain(self) -> list[Any]:
        """Everything queued now, oldest first, without waiting (a slow writer catches up in one go)."""
        items = list(self._items)
        self._items.clear()
        return items

    def __len__(self) -> int:
        return len(self._items)

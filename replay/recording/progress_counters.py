"""Live counters of a replay, for a progress display to poll; the replay never prints.

Plain ints and floats written from the event loop and read from the display's refresh thread: a torn
read can at worst show a number one update old.
"""

from __future__ import annotations

from replay.recording.records import RequestRecord, RequestStatus
from replay.recording.schedule_lag import schedule_lag_s


class ReplayProgress:
    __slots__ = ("total", "sent", "done", "errors", "lag_last_ms", "lag_max_ms")

    def __init__(self, total: int = 0) -> None:
        self.total = total  # requests this process will replay
        self.sent = 0  # handed to a client (past the schedule and any hold)
        self.done = 0  # recorded, whatever the status
        self.errors = 0  # recorded with a status other than ok
        self.lag_last_ms = 0.0  # schedule lag of the last recorded request
        self.lag_max_ms = 0.0

    @property
    def in_flight(self) -> int:
        return self.sent - self.done

    def on_sent(self) -> None:
        self.sent += 1

    def on_record(self, record: RequestRecord) -> None:
        self.done += 1
        if record.status is not RequestStatus.OK:
            self.errors += 1
        lag_s = schedule_lag_s(record)
        if lag_s is not None:
            lag_ms = lag_s * 1000.0
            self.lag_last_ms = lag_ms
            self.lag_max_ms = max(self.lag_max_ms, lag_ms)

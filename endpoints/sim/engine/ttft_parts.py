"""Where a request's time to first token went, in the stages SGLang's request-level timing names.

SGLang 0.5.23 stamps each request's way through its scheduler (observability/req_time_stats.py,
SchedulerReqTimeStats): unified, wait_queue -> forward; a prefill server, bootstrap_queue -> wait_queue -> forward ->
transfer_queue; a decode server, prealloc_queue -> transfer_queue -> wait_queue -> forward. The twin runs the same
stages (engine.py), so it can say, for the server that answers the client, how long each took before the first token
went out. The parts add up to that server's TTFT exactly (arrival there to the first token it sends):

- unified: queue (arrival to the first forward batch: SGLang's `queue_time`) + prefill (the first forward batch to
  the first token sampled: `forward_entry_time` to `prefill_finished_time`);
- a prefill server: bootstrap (its bootstrap queue: arrival until its decode server took KV slots and said so) +
  queue + prefill; its KV transfer comes after its first token;
- a decode server (the one the router streams to the client): prealloc (its prealloc queue: arrival until its pool
  took slots for the prompt's KV) + bootstrap (from then until the prefill queued the request: the handshake and the
  notices, what is left of the wait for the KV once the prefill's own parts are taken out) + queue and prefill (the
  prefill server's, carried over in RoomDone) + kv_transfer (the prefill's transfer queue: the KV's bytes over the
  link) + decode_wait (the KV's arrival until the decode server sends the first token: its waiting queue, until a
  step boundary where its running batch has room).

A real SGLang reports none of these as durations: its meta_info carries `queue_time`, `forward_entry_time` and
`prefill_finished_time` (SchedulerReqTimeStats.convert_to_output_meta_info), from which only queue and prefill follow.
"""

from __future__ import annotations

from dataclasses import dataclass

# The parts in the order a request passes them; the names the twin's meta_info uses (endpoints/sim/http/native_view.py).
PART_NAMES = ("prealloc", "bootstrap", "queue", "prefill", "kv_transfer", "decode_wait")


@dataclass(frozen=True, slots=True, kw_only=True)
class TtftParts:
    """One request's TTFT on the server that sent its first token, by stage (ms; None: not a stage of this request
    on this server, e.g. the transfer parts of a unified request)."""

    prealloc_ms: float | None = None  # decode: in the prealloc queue, until the pool took slots for the prompt's KV
    bootstrap_ms: float | None = None  # prefill or decode: until the prefill queued it (see the module's docstring)
    queue_ms: float  # in the waiting queue before the first forward batch (the prefill server's, disaggregated)
    prefill_ms: float  # the first forward batch to the first token sampled
    kv_transfer_ms: float | None = None  # decode: the first token sampled on the prefill to the KV's arrival here
    decode_wait_ms: float | None = None  # decode: the KV's arrival to the first token sent

    @classmethod
    def unified(cls, arrival_s: float, admitted_s: float, first_token_s: float) -> TtftParts:
        return cls(queue_ms=(admitted_s - arrival_s) * 1e3, prefill_ms=(first_token_s - admitted_s) * 1e3)

    @classmethod
    def prefill_server(cls, arrival_s: float, queued_s: float, admitted_s: float, first_token_s: float) -> TtftParts:
        return cls(
            bootstrap_ms=(queued_s - arrival_s) * 1e3,
            queue_ms=(admitted_s - queued_s) * 1e3,
            prefill_ms=(first_token_s - admitted_s) * 1e3,
        )

    @classmethod
    def decode_server(
        cls,
        arrival_s: float,
        preallocated_s: float,
        kv_arrived_s: float,
        first_token_s: float,
        prefill_queue_s: float,
        prefill_forward_s: float,
        transfer_s: float,
    ) -> TtftParts:
        """On the decode server's clock; the prefill's parts are durations (its clock is its own)."""
        carried_s = prefill_queue_s + prefill_forward_s + transfer_s
        return cls(
            prealloc_ms=(preallocated_s - arrival_s) * 1e3,
            bootstrap_ms=(kv_arrived_s - preallocated_s - carried_s) * 1e3,
            queue_ms=prefill_queue_s * 1e3,
            prefill_ms=prefill_forward_s * 1e3,
            kv_transfer_ms=transfer_s * 1e3,
            decode_wait_ms=(first_token_s - kv_arrived_s) * 1e3,
        )

    def named(self) -> dict[str, float]:
        """{part name: ms} for the parts that are stages of this request, in PART_NAMES order."""
        values = (
            self.prealloc_ms, self.bootstrap_ms, self.queue_ms, self.prefill_ms, self.kv_transfer_ms,
            self.decode_wait_ms,
        )  # fmt: skip
        return {name: ms for name, ms in zip(PART_NAMES, values) if ms is not None}

    @property
    def total_ms(self) -> float:
        """The TTFT the parts add up to (ms)."""
        return sum(self.named().values())

"""What serves a capacity sweep's or a fleet plan's requests: one server, replicas behind SGLang's router, or a
disaggregated fleet of prefill and decode workers behind its PD router. One type for all three, so one bench
(deployment_bench.py) runs it and one sweep (slo_capacity.py) measures it; the fleet plan's shapes are
deployments too, and `shape_label` names them wherever they are shown (the plan, the report, the console).
"""

from __future__ import annotations

from dataclasses import dataclass

from endpoints.router.router_spec import RouterSpec
from endpoints.spec import EndpointSpec, WorkerRole


@dataclass(frozen=True, slots=True)
class Deployment:
    """`replicas` aggregated workers with `flags` (one server: 1 and no router), or, with `prefill_workers`, that
    many prefill workers and `decode_workers` decode workers, each role with its full flags."""

    flags: tuple[str, ...]  # an aggregated worker's flags (a PD fleet's: the flags its roles share)
    gpus_per_worker: int  # an aggregated or prefill worker's GPUs (count)
    replicas: int = 1  # aggregated workers (count; 0 in a disaggregated fleet)
    router: RouterSpec | None = None  # None: one server, nothing routes
    prefill_workers: int = 0
    decode_workers: int = 0
    prefill_flags: tuple[str, ...] = ()
    decode_flags: tuple[str, ...] = ()
    decode_gpus_per_worker: int = 0  # 0: as gpus_per_worker
    # Its decode workers are each one wide expert-parallel server over this many GPUs (ep_shapes.py); 0: the
    # endpoint's own kind of worker.
    decode_ep_size: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.prefill_workers > 0

    @property
    def workers(self) -> int:
        """Servers behind the router (count): replicas, or prefill plus decode workers."""
        return self.prefill_workers + self.decode_workers if self.disaggregated else self.replicas

    @property
    def policy(self) -> str:
        return self.router.policy if self.router is not None else "none"

    @property
    def gpus_per_decode_worker(self) -> int:
        return self.decode_gpus_per_worker or self.gpus_per_worker

    @property
    def gpus(self) -> int:
        if self.disaggregated:
            return self.prefill_workers * self.gpus_per_worker + self.decode_workers * self.gpus_per_decode_worker
        return self.replicas * self.gpus_per_worker

    @property
    def label(self) -> str:
        return shape_label(self.workers, self.policy, self.prefill_workers, self.decode_workers, self.decode_ep_size)


def shape_label(replicas: int, policy: str, prefill_workers: int, decode_workers: int, decode_ep_size: int = 0) -> str:
    """A deployment as the plan, the report and the console name it: '4 x cache_aware', '1P3D x cache_aware', or
    '1P2D (EP16 decode) x cache_aware'."""
    if prefill_workers:
        wide = f" (EP{decode_ep_size} decode)" if decode_ep_size else ""
        return f"{prefill_workers}P{decode_workers}D{wide} x {policy}"
    return f"{replicas} x {policy}"


def shape_workers(replicas: int, prefill_workers: int, decode_workers: int, decode_ep_size: int = 0) -> str:
    """Its workers in a table cell: '4' replicas, '1P + 3D', or '1P + 2D of EP16'."""
    if not prefill_workers:
        return str(replicas)
    return f"{prefill_workers}P + {decode_workers}D" + (f" of EP{decode_ep_size}" if decode_ep_size else "")


def deployment_of(endpoint: EndpointSpec) -> Deployment:
    """The deployment an endpoint describes: one server, its fleet of replicas, or its prefill and decode groups
    (the endpoint's flags, then each role's, then the role itself)."""
    fleet = endpoint.fleet
    flags = tuple(endpoint.server_args)
    if fleet is None:
        return Deployment(flags, endpoint.gpu_count)
    if not fleet.disaggregated:
        return Deployment(flags, endpoint.gpu_count // fleet.replicas, fleet.replicas, fleet.router)
    groups = {g.role: g for g in fleet.groups}
    prefill, decode = groups[WorkerRole.PREFILL], groups[WorkerRole.DECODE]
    return Deployment(
        flags, prefill.gpus_per_worker, 0, fleet.router, prefill.count, decode.count,
        (*flags, *prefill.server_args, "--disaggregation-mode", "prefill"),
        (*flags, *decode.server_args, "--disaggregation-mode", "decode"),
        decode.gpus_per_worker,
    )  # fmt: skip

"""The cap on running requests a server enforces, from /server_info as SGLang shapes it."""

from __future__ import annotations

import pytest

from endpoints.running_cap import max_running_requests


def test_the_enforced_cap_sglang_reports_wins_and_is_summed_over_dp_ranks():
    # SGLang's Scheduler.get_internal_state: one internal state per DP rank, each with what it enforces;
    # the flag says 256 but the ranks enforce 48 each (e.g. MTP's default), and the ranks add up.
    info = {"max_running_requests": 256, "dp_size": 4, "enable_dp_attention": True,
            "internal_states": [{"effective_max_running_requests_per_dp": 48} for _ in range(4)]}  # fmt: skip
    assert max_running_requests(info) == 4 * 48
    # Derived by SGLang (flag unset) and reported: known.
    assert (
        max_running_requests(
            {"max_running_requests": None, "internal_states": [{"effective_max_running_requests_per_dp": 1024}]}
        )
        == 1024
    )


@pytest.mark.parametrize(
    "info, cap",
    [
        ({"max_running_requests": 128}, 128),  # an older build: the configured cap
        ({"scheduler_info": {"max_running_requests": 64}}, 64),
        # DP attention: each of 8 ranks enforces 100 // 8 = 12; the worker runs 96 at most.
        ({"max_running_requests": 100, "dp_size": 8, "enable_dp_attention": True}, 96),
        # Data-parallel replicas without DP attention each enforce the whole flag.
        ({"max_running_requests": 100, "dp_size": 2, "enable_dp_attention": False}, 200),
        # A rank that does not say makes the report unusable: back to the flag.
        ({"max_running_requests": 32, "internal_states": [{"effective_max_running_requests_per_dp": 16}, {}]}, 32),
    ],
)
def test_older_builds_fall_back_to_the_configured_cap(info, cap):
    assert max_running_requests(info) == cap


@pytest.mark.parametrize(
    "info",
    [{}, {"max_running_requests": None}, {"max_running_requests": "many"}, {"max_running_requests": 0},
     {"max_running_requests": True}, {"internal_states": [{"effective_max_running_requests_per_dp": float("nan")}]},
     {"max_running_requests": 3, "dp_size": 4, "enable_dp_attention": True}],
)  # fmt: skip
def test_an_unknown_cap_is_none_not_a_guess(info):
    assert max_running_requests(info) is None

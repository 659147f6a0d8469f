"""The router flags the virtual clock's model takes: smg 1.13.0's own (endpoints/router/smg_launch_flags.txt), checked
against the pinned binary's `smg launch --help`, so a mistyped flag is refused by name instead of ignored."""

from __future__ import annotations

import re
import subprocess

import pytest

from endpoints.router.policy_params import SMG_LAUNCH_FLAGS, UnmodelledRouting, parse_router_spec
from endpoints.router.router_spec import RouterSpec
from twin_process import SMG


def _help_flags() -> set[str]:
    text = subprocess.run([str(SMG), "launch", "--help"], capture_output=True, text=True, check=True, timeout=30).stdout
    flags: set[str] = set()
    for line in text.splitlines():
        option = line.lstrip()
        if option.startswith("-"):  # an option's line: its names before the two-space gap to its help text
            flags.update(re.findall(r"--[a-z0-9][a-z0-9-]*", re.split(r"\s{2,}", option.strip())[0]))
    return flags


def test_the_bundled_list_is_the_pinned_smg_s_own():
    version = subprocess.run([str(SMG), "--version"], capture_output=True, text=True, check=True, timeout=30).stdout
    assert "1.13.0" in version  # the list is this version's; a new pin needs a new list
    assert set(SMG_LAUNCH_FLAGS) == _help_flags()


def test_a_mistyped_flag_is_refused_by_name():
    with pytest.raises(UnmodelledRouting, match=r"router flag --cache-treshold is not a flag of smg 1\.13\.0"):
        parse_router_spec(RouterSpec("cache_aware", ("--cache-treshold", "0.5")))


def test_a_real_flag_that_does_not_route_is_taken_and_a_modelled_one_changes_the_model():
    quiet = parse_router_spec(RouterSpec("cache_aware", ("--log-level", "warn")))
    assert quiet == parse_router_spec(RouterSpec("cache_aware"))
    tuned = parse_router_spec(RouterSpec("cache_aware", ("--cache-threshold=0.8",)))
    assert tuned.cache_aware.cache_threshold == 0.8

"""The demo's story: the bundled scenarios over the last weeks, with one deployment change in them.

In the second-to-last week someone turned the radix cache off on the chat endpoint (a dated revision in
the demo's own copy of endpoints.yaml); the week after, it is back on. The trend, the regression check
and the report should all show it. The story endpoint's scenarios replay every week of the demo; the
others (the R1 pair that prices structured output) the last week only: their canaries have no story to
tell over weeks, and a week of them costs about 80 s of CPU, which the demo's five minutes do not have.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import yaml

from workloads.scenarios import Scenario

STORY_ENDPOINT = "v3-8xh200-chat"
STORY_NOTE = "radix cache disabled while debugging a KV-cache memory leak"


def story_endpoints(bundled: Path, out: Path, weeks: list[date]) -> Path:
    """Writes a copy of `bundled` in which STORY_ENDPOINT runs without its radix cache in weeks[-2]."""
    raw = yaml.safe_load(bundled.read_text())
    if len(weeks) >= 2:
        for entry in raw["endpoints"]:
            if entry["name"] == STORY_ENDPOINT:
                normal = list(entry["server_args"])
                entry["revisions"] = [
                    {
                        "from_week": weeks[-2].isoformat(),
                        "server_args": [*normal, "--disable-radix-cache"],
                        "note": STORY_NOTE,
                    },
                    {"from_week": weeks[-1].isoformat(), "server_args": normal, "note": "radix cache back on"},
                ]
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def story_partitions(scenarios: dict[str, Scenario], weeks: list[date]) -> list[tuple[date, str]]:
    """(week, scenario) pairs the demo replays: every week for STORY_ENDPOINT's scenarios, oldest first (each week's
    baseline exists before it), and the last week for the others, listed before the story's last week.

    The backfill does not keep this order: `dagster job backfill` queues the partitions in the partitions
    definition's order, by scenario and then oldest week first, which keeps each scenario's weeks in order; the
    other endpoints' runs then start last (seen in the demo's run records, 2026-12-07)."""
    story = sorted(name for name in scenarios if scenarios[name].endpoint == STORY_ENDPOINT)
    others = sorted(name for name in scenarios if scenarios[name].endpoint != STORY_ENDPOINT)
    earlier = [(week, name) for week in weeks[:-1] for name in story]
    return [*earlier, *((weeks[-1], name) for name in others), *((weeks[-1], name) for name in story)]

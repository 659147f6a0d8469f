"""Configuration files are read with bounded work and no silent last-one-wins, whatever they hold
(common/config_file.py): an alias bomb, deep nesting and a key written twice are refused, naming the file
(and the line), and nothing is loaded."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from common.config_file import MAX_CONFIG_BYTES, MAX_YAML_VALUES
from endpoints.spec import EndpointSpecError, load_endpoint_specs
from warehouse.marts.price_table import PriceTableError, load_price_table
from workloads.scenarios import ScenarioError, load_scenarios

REPO = Path(__file__).resolve().parents[2]


def _bomb(levels: int = 9) -> str:
    lines = ["lol0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"lol{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_scenarios_yaml_is_refused_quickly_naming_the_file(tmp_path):
    bundled = (REPO / "workloads" / "scenarios.yaml").read_text()
    path = tmp_path / "scenarios.yaml"
    path.write_text(_bomb() + re.sub(r"(?m)^(\s+)slo: .*$", r"\1slo: *a8", bundled, count=1))
    started = time.monotonic()
    with pytest.raises(ScenarioError, match=r"scenarios\.yaml: more than 20,000 values once its aliases"):
        load_scenarios(path, REPO)
    assert time.monotonic() - started < 5  # 10^9 values if expanded


def test_nesting_past_the_limit_is_a_clear_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "endpoints.yaml"
    for depth, expected in ((60, r"endpoints\.yaml: line \d+: nested deeper than 50 levels"), (5000, "nested")):
        path.write_text("endpoints: " + "[" * depth + "]" * depth + "\n")
        with pytest.raises(EndpointSpecError, match=expected):
            load_endpoint_specs(path)


def test_a_price_written_twice_is_refused_with_its_line_and_key(tmp_path):
    bundled = (REPO / "warehouse" / "prices.yaml").read_text().splitlines()
    [at] = [i for i, line in enumerate(bundled) if line.strip().startswith("usd_per_gpu_hour:")][:1]
    indent = bundled[at][: len(bundled[at]) - len(bundled[at].lstrip())]
    lines = [*bundled[: at + 1], f"{indent}usd_per_gpu_hour: 0.01", *bundled[at + 1 :]]
    path = tmp_path / "prices.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        PriceTableError,
        match=rf"prices\.yaml: line {at + 2}: key 'usd_per_gpu_hour' is written twice in one mapping \(first at line {at + 1}\)",
    ):
        load_price_table(path)


@pytest.mark.parametrize(
    ("name", "loader", "error"),
    [("endpoints.yaml", load_endpoint_specs, EndpointSpecError), ("scenarios.yaml", None, ScenarioError)],
)
def test_a_key_written_twice_is_refused_in_every_config_file(tmp_path, name, loader, error):
    text = (REPO / "workloads" / name).read_text()
    first_key = next(line for line in text.splitlines() if line.startswith("  - name:") or line.startswith("- name:"))
    key_line = text.splitlines().index(first_key)
    lines = text.splitlines()
    prefix = first_key[: first_key.index("- name:")] + "  "
    lines.insert(key_line + 1, f"{prefix}name: {first_key.split(':', 1)[1].strip()}")
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(error, match=re.escape(f"{name}: line {key_line + 2}: key 'name' is written twice")):
        (loader or (lambda p: load_scenarios(p, REPO)))(path)


def test_the_bundled_files_still_load():
    assert load_endpoint_specs(REPO / "workloads" / "endpoints.yaml")
    assert load_scenarios(REPO / "workloads" / "scenarios.yaml", REPO)
    assert load_price_table(REPO / "warehouse" / "prices.yaml")


def test_a_date_that_does_not_exist_is_named_with_its_file_and_line(tmp_path):
    text = (REPO / "workloads" / "endpoints.yaml").read_text()
    revision = '    revisions:\n      - {from_week: 2026-02-30, server_args: [--tp, "8"], note: why}\n'
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("gpu_count:"))
    path = tmp_path / "endpoints.yaml"
    path.write_text("".join([*lines[: at + 1], revision, *lines[at + 1 :]]))
    with pytest.raises(EndpointSpecError, match=rf"endpoints\.yaml: line {at + 3}: '2026-02-30' is not a date"):
        load_endpoint_specs(path)


def _with(text: str, key: str, value: str) -> str:
    """The file with the first `key:` line's value replaced (the key kept at its indent)."""
    return re.sub(rf"(?m)^(\s+){key}: [^#\n]*", rf"\g<1>{key}: {value} ", text, count=1)


@pytest.mark.parametrize(
    ("name", "key", "value", "expected"),
    [
        ("scenarios.yaml", "speedup", "4.9e-324", r"speedup: must be >= 0\.001"),
        ("scenarios.yaml", "duration_s", "1.0e+300", r"duration_s: must be <= 3\.1536e\+08"),
        ("endpoints.yaml", "gpu_count", "100000000000000000000000", r"gpu_count: must be <= 65536"),
        ("endpoints.yaml", "scrape_interval_s", "1.0e+30", r"scrape_interval_s: must be <= 3600"),
    ],
)
def test_a_number_past_its_stated_range_is_refused_with_its_key(tmp_path, name, key, value, expected):
    path = tmp_path / name
    path.write_text(_with((REPO / "workloads" / name).read_text(), key, value))
    with pytest.raises((ScenarioError, EndpointSpecError), match=expected):
        if name == "scenarios.yaml":
            load_scenarios(path, REPO)
        else:
            load_endpoint_specs(path)


def test_shards_past_the_cap_and_a_price_of_1e308_are_refused(tmp_path):
    scenarios = tmp_path / "scenarios.yaml"
    text = (REPO / "workloads" / "scenarios.yaml").read_text()
    scenarios.write_text(
        re.sub(r"(?m)^(\s+)speedup: ", r"\g<1>shards: 1000000000000000000000000000000\n\g<1>speedup: ", text, count=1)
    )
    with pytest.raises(ScenarioError, match=r"shards: must be <= 1024"):
        load_scenarios(scenarios, REPO)
    prices = tmp_path / "prices.yaml"
    prices.write_text(_with((REPO / "warehouse" / "prices.yaml").read_text(), "usd_per_gpu_hour", "1.0e+308"))
    with pytest.raises(PriceTableError, match=r"usd_per_gpu_hour: must be <= 1000"):
        load_price_table(prices)


def test_a_key_written_twice_on_one_line_is_refused_too(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text("endpoints:\n  - {name: a, name: b}\n")
    with pytest.raises(
        EndpointSpecError, match=r"line 2: key 'name' is written twice in one mapping \(first at line 2\)"
    ):
        load_endpoint_specs(path)


LOADERS = [
    ("workloads/scenarios.yaml", lambda p: load_scenarios(p, REPO), ScenarioError),
    ("workloads/endpoints.yaml", load_endpoint_specs, EndpointSpecError),
    ("warehouse/prices.yaml", load_price_table, PriceTableError),
]


@pytest.mark.parametrize(("bundled", "load", "error"), LOADERS)
def test_a_file_over_the_size_bound_is_refused_unread_naming_it_and_the_bound(tmp_path, bundled, load, error):
    # The bundled file, then comments to 50 MB: PyYAML alone scans that for about a minute.
    path = tmp_path / Path(bundled).name
    text = (REPO / bundled).read_text()
    with path.open("w") as out:
        out.write(text)
        line = "# " + "x" * 998 + "\n"
        for _ in range(50_000):
            out.write(line)
    started = time.monotonic()
    with pytest.raises(
        error, match=rf"^{re.escape(str(path))}: over 1,048,576 bytes, the bound of a configuration file; not read$"
    ):
        load(path)
    assert time.monotonic() - started < 1.0
    path.write_text(text + "# " + "x" * (MAX_CONFIG_BYTES - len(text.encode()) - 3) + "\n")  # at the bound: read
    assert path.stat().st_size == MAX_CONFIG_BYTES and load(path)


@pytest.mark.parametrize(("bundled", "load", "error"), LOADERS)
@pytest.mark.parametrize(
    ("bad", "found"),
    [
        (b"\x00", r"character U\+0000 not allowed in YAML"),
        (b"\xe9", r"byte 0xe9 is not UTF-8 text"),  # a Latin-1 e-acute
        (b"\xff\xfe", r"byte 0xff is not UTF-8 text"),
    ],
)
def test_a_nul_or_a_byte_that_is_not_utf8_is_named_with_file_and_line(tmp_path, bundled, load, error, bad, found):
    lines = (REPO / bundled).read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"name:" in line)  # inside the first entry's name
    lines[at] = lines[at].rstrip(b"\n") + bad + b"\n"
    path = tmp_path / Path(bundled).name
    path.write_bytes(b"".join(lines))
    with pytest.raises(error, match=rf"^{re.escape(str(path))}: line {at + 1}: {found}"):
        load(path)


def test_a_dense_file_under_the_size_bound_stops_at_the_value_bound_quickly(tmp_path):
    # 1 MB of one-character values: 350,000 of them if composed whole; stopped at MAX_YAML_VALUES.
    path = tmp_path / "endpoints.yaml"
    row = "[" + ", ".join(["1"] * 60) + "]"
    path.write_text("endpoints:\n" + "".join(f"  - {row}\n" for _ in range(MAX_CONFIG_BYTES // (len(row) + 5))))
    started = time.process_time()
    with pytest.raises(EndpointSpecError, match=rf"endpoints\.yaml: line \d+: more than {MAX_YAML_VALUES:,} values"):
        load_endpoint_specs(path)
    assert time.process_time() - started < 3.0

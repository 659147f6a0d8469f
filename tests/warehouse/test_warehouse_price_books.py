"""Price books: several ways to pay for a GPU-hour (rent on demand, reserved, own), chosen by an endpoint, the one
used stored on every run; a user's own price file replaces the bundled one; a price change is the price part of
the attribution."""

from __future__ import annotations

import json
from datetime import date

import pytest

from endpoints.spec import load_endpoint_specs
from warehouse.backends.store import Warehouse
from warehouse.marts.price_table import PRICES_ENV, PriceBookError, PriceTableError, load_price_table, resolve_gpu_price
from warehouse_builders import endpoint, request, run_info, write_run
from workloads.scenarios import default_endpoints_path

OWN = (
    "  - name: h200-own\n    gpu_type: H200\n    kind: own\n    as_of: 2026-11-29\n    assumption: true\n"
    "    source: 'assumption: round figures'\n    own: {capex_usd_per_gpu: 26280, amortisation_years: 3,"
    " power_kw_per_gpu: 1.0, pue: 1.5, usd_per_kwh: 0.2, hosting_usd_per_gpu_month: 73}\n"
)
RENT = (
    "  - {name: h200-rent, gpu_type: H200, kind: rent_on_demand, usd_per_gpu_hour: 5.0, as_of: 2026-11-29,"
    " source: 'https://example.org/rates'}\n"
)


def _prices(tmp_path, books: str) -> object:
    path = tmp_path / "prices.yaml"
    path.write_text(f"gpu: []\napi: []\nprice_books:\n{books}")
    return path


def test_the_shipped_books_rent_and_own_every_h200_and_mark_their_assumptions():
    books = {b.name: b for b in load_price_table().books}
    h200 = {b.kind for b in books.values() if b.gpu_type == "H200"}
    assert h200 == {"rent_on_demand", "rent_reserved", "own"}
    for book in books.values():
        assert book.usd_per_gpu_hour > 0 and book.as_of.year >= 2026
        assert book.assumption == book.source.startswith("assumption:")  # every unsourced figure says so
    # Owning is paid every hour, used or idle: 40,000 / (3 x 8760) + 1.1 kW x 1.3 x $0.10 + 150 x 12 / 8760.
    assert books["h200-own-3y"].usd_per_gpu_hour == pytest.approx(40000 / 26280 + 0.143 + 1800 / 8760)


def test_the_shipped_endpoints_take_their_price_from_a_book():
    table = load_price_table()
    for spec in load_endpoint_specs(default_endpoints_path()).values():
        usd, book = resolve_gpu_price(spec, table)
        assert book == spec.price_book and usd == pytest.approx(3.50)  # h200-reserved: the price they had


def test_an_endpoint_picks_a_book_and_its_own_price_overrides_it(tmp_path):
    table = load_price_table(_prices(tmp_path, OWN + RENT))
    # 26,280 / 26,280 h + 1.0 kW x 1.5 x $0.2 + 73 x 12 / 8760.
    assert resolve_gpu_price(endpoint(usd_per_gpu_hour=None, price_book="h200-own"), table) == (
        pytest.approx(1.0 + 0.3 + 0.1),
        "h200-own",
    )
    assert resolve_gpu_price(endpoint(usd_per_gpu_hour=2.5, price_book="h200-own"), table) == (2.5, "endpoint")
    with pytest.raises(PriceBookError, match=r"names price book 'h100-own', which .*prices.yaml does not list"):
        resolve_gpu_price(endpoint(usd_per_gpu_hour=None, price_book="h100-own"), table)
    with pytest.raises(PriceBookError, match=r"runs on B200 but price book 'h200-rent'"):
        resolve_gpu_price(endpoint(usd_per_gpu_hour=None, price_book="h200-rent", gpu_type="B200"), table)


def test_a_book_is_refused_whole_saying_where(tmp_path):
    with pytest.raises(PriceTableError, match=r"price_books\[1\]: kind own takes `own`"):
        load_price_table(_prices(tmp_path, RENT + RENT.replace("h200-rent", "x").replace("rent_on_demand", "own")))
    with pytest.raises(PriceTableError, match=r"price_books\[1\].name: 'h200-rent' is listed twice"):
        load_price_table(_prices(tmp_path, RENT + RENT))
    path = tmp_path / "endpoints.yaml"
    path.write_text(json.dumps({"endpoints": [{"name": "e", "mode": "sim", "model": "m", "gpu_type": "H200",
                                               "gpu_count": 8, "price_book": "h200-rent"}]}))  # fmt: skip
    assert load_endpoint_specs(path)["e"].usd_per_gpu_hour is None


def test_a_users_price_file_changes_the_runs_price_and_that_is_the_price_part(tmp_path, monkeypatch):
    store = Warehouse(tmp_path / "wh")
    spec = endpoint(usd_per_gpu_hour=None, price_book="h200-rent")
    for week, rate in ((date(2026, 11, 2), "5.0"), (date(2026, 11, 9), "6.5")):
        monkeypatch.setenv(PRICES_ENV, str(_prices(tmp_path, RENT.replace("5.0", rate))))
        records = [request(f"r-{week}", f"q{i}", 100.0, 300.0, sent_mono_s=1 + i * 0.25) for i in range(40)]
        write_run(store.lake_root, week, "chat", run_info(f"r-{week}", 20.0), spec, records)
    store.refresh()
    runs = store.run_summary()
    assert [(r.price_book, r.usd_per_gpu_hour) for r in runs] == [("h200-rent", 5.0), ("h200-rent", 6.5)]
    with store.connect() as con:
        change, price = con.execute(
            "SELECT change_usd, price_usd FROM cost_attribution WHERE week_start = DATE '2026-11-09'"
        ).fetchone()
        assert con.execute("SELECT count(*) FROM price_books WHERE name = 'h200-rent'").fetchone() == (1,)
    assert change == pytest.approx(8 * 1.5 * 20 / 3600 / 40) and price == pytest.approx(change, rel=1e-12)

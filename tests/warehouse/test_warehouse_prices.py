"""warehouse/prices.yaml: every price dated and sourced; a bad file is refused whole, saying where."""

from __future__ import annotations

import pytest

from warehouse.marts.price_table import PriceTableError, load_price_table


def test_the_shipped_price_table_prices_every_gpu_and_both_models():
    table = load_price_table()
    assert {row[0] for row in table.gpu_rows} >= {"H100", "H200", "B200"}
    models = {row[0] for row in table.api_rows}
    assert {"deepseek-ai/deepseek-v3", "deepseek-ai/deepseek-r1"} <= models
    for row in table.api_rows:
        _, _, cached, uncached, output, as_of, source = row
        assert 0 < cached < uncached < output  # cache hits are the cheapest input, output the dearest
        assert source.startswith(("DeepSeek", "http")) and "https://" in source and as_of.year >= 2025
    for _, usd, as_of, source in table.gpu_rows:
        assert usd > 0 and "https://" in source and as_of.year >= 2025


def test_a_price_without_a_date_or_a_duplicate_model_is_refused(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("gpu:\n  - {gpu_type: H100, usd_per_gpu_hour: 2.0, source: 'https://example.org/p'}\napi: []\n")
    with pytest.raises(PriceTableError, match=r"prices.yaml: gpu\[0\].as_of: required key is missing"):
        load_price_table(path)
    api = (
        "  - {name: %s, models: [m], usd_per_mtok_cached_input: 1, usd_per_mtok_uncached_input: 2,"
        " usd_per_mtok_output: 3, as_of: 2026-01-01, source: 'https://example.org/p'}\n"
    )
    path.write_text("gpu: []\napi:\n" + api % "a" + api % "b")
    with pytest.raises(PriceTableError, match=r"api\[1\].models: model 'm' is priced by both 'a' and 'b'"):
        load_price_table(path)


@pytest.mark.parametrize(
    "gpu, message",
    [
        ("{gpu_type: H100, usd_per_gpu_hour: '2.0', as_of: 2026-01-01, source: 'https://example.org/p'}",
         r"gpu\[0\].usd_per_gpu_hour: must be a number, got '2.0'"),
        ("{gpu_type: H100, usd_per_gpu_hour: 2.0, as_of: 2026-01-01, source: 'https://example.org/p', vendor: x}",
         r"gpu\[0\].vendor: unknown key"),
        ("{gpu_type: H100, usd_per_gpu_hour: 2.0, as_of: soon, source: 'https://example.org/p'}",
         r"gpu\[0\].as_of: 'soon' is not a date \(YYYY-MM-DD\)"),
        ("{gpu_type: H100, usd_per_gpu_hour: 0, as_of: 2026-01-01, source: 'https://example.org/p'}",
         r"gpu\[0\].usd_per_gpu_hour: must be > 0, got 0"),
    ],
)  # fmt: skip
def test_a_wrong_type_or_unknown_key_names_the_key_path(tmp_path, gpu, message):
    path = tmp_path / "prices.yaml"
    path.write_text(f"gpu:\n  - {gpu}\napi: []\n")
    with pytest.raises(PriceTableError, match=message) as error:
        load_price_table(path)
    assert str(error.value).startswith(f"{path}: ")
    path.write_text(
        "gpu:\n  - {gpu_type: H100, usd_per_gpu_hour: 2.0, as_of: '2026-01-05', source: 'https://example.org/p'}\napi: []\n"
    )
    assert load_price_table(path).gpu_rows[0][2].isoformat() == "2026-01-05"  # a quoted date is the same date


OWN_BOOK = (
    "gpu: []\napi: []\nprice_books:\n  - name: h200-own\n    gpu_type: H200\n    kind: own\n    as_of: 2026-01-01\n"
    "    source: 'assumed round figures'\n    own: {capex_usd_per_gpu: %s, amortisation_years: %s, power_kw_per_gpu: 1.1,\n"
    "          pue: 1.3, usd_per_kwh: 0.1, hosting_usd_per_gpu_month: 150}\n"
)


def test_a_computed_price_is_bounded_as_a_quoted_one(tmp_path):
    # 100,000 USD over 0.0001 years is 114,156 USD per GPU-hour: refused, naming the file, the key and the book.
    path = tmp_path / "prices.yaml"
    path.write_text(OWN_BOOK % (100_000, 0.0001))
    with pytest.raises(PriceTableError) as error:
        load_price_table(path)
    assert str(error.value).startswith(
        f"{path}: price_books[0].own: computes 114,155.60 USD per GPU-hour, over the 1,000 a price may be "
        "(capex_usd_per_gpu 100000 over amortisation_years 0.0001"
    )
    assert str(error.value).endswith("(price book 'h200-own')")
    path.write_text(OWN_BOOK % (40_000, 3))
    [book] = load_price_table(path).books
    assert book.usd_per_gpu_hour == pytest.approx(1.87, abs=0.01)  # the bundled book's figures

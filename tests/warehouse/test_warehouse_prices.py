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

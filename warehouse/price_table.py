"""warehouse/prices.yaml: GPU list prices and API prices, validated, as rows for DuckDB tables gpu_prices, api_prices.

Prices are informational (self-host vs API); a run's own cost uses its endpoint's usd_per_gpu_hour.
A bad file is refused whole, as `<file>: <key path>: <reason>` (workloads/config_file.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import Field

from workloads.config_file import (
    ConfigFileError,
    ConfigModel,
    IsoDate,
    NonEmptyStr,
    config_error,
    parse_config,
    read_yaml,
)


class PriceTableError(ConfigFileError):
    pass


class _GpuPrice(ConfigModel):
    gpu_type: NonEmptyStr
    usd_per_gpu_hour: float = Field(gt=0)
    as_of: IsoDate
    source: str = Field(min_length=8)


class _ApiPrice(ConfigModel):
    name: NonEmptyStr
    models: list[NonEmptyStr] = Field(min_length=1)
    usd_per_mtok_cached_input: float = Field(ge=0)
    usd_per_mtok_uncached_input: float = Field(ge=0)
    usd_per_mtok_output: float = Field(ge=0)
    as_of: IsoDate
    source: str = Field(min_length=8)


class _PriceFile(ConfigModel):
    gpu: list[_GpuPrice]
    api: list[_ApiPrice]


@dataclass(frozen=True, slots=True)
class PriceTable:
    gpu_rows: tuple[tuple, ...]  # (gpu_type, usd_per_gpu_hour, as_of, source)
    api_rows: tuple[tuple, ...]  # (model lower-cased, name, cached, uncached, output, as_of, source)


def default_prices_path() -> Path:
    return Path(str(resources.files("warehouse").joinpath("prices.yaml")))


def load_price_table(path: Path | None = None) -> PriceTable:
    path = Path(path) if path is not None else default_prices_path()
    parsed = parse_config(_PriceFile, read_yaml(path, PriceTableError), path, PriceTableError)
    seen_gpus: dict[str, int] = {}
    for index, price in enumerate(parsed.gpu):
        if price.gpu_type in seen_gpus:
            raise config_error(
                PriceTableError, path, ("gpu", index, "gpu_type"),
                f"{price.gpu_type!r} is listed twice (first at gpu[{seen_gpus[price.gpu_type]}])",
            )  # fmt: skip
        seen_gpus[price.gpu_type] = index
    api_rows = []
    seen: dict[str, str] = {}
    for index, api_price in enumerate(parsed.api):
        for model in api_price.models:
            key = model.lower()
            if key in seen:
                raise config_error(
                    PriceTableError, path, ("api", index, "models"),
                    f"model {model!r} is priced by both {seen[key]!r} and {api_price.name!r}",
                )  # fmt: skip
            seen[key] = api_price.name
            api_rows.append(
                (
                    key,
                    api_price.name,
                    api_price.usd_per_mtok_cached_input,
                    api_price.usd_per_mtok_uncached_input,
                    api_price.usd_per_mtok_output,
                    api_price.as_of,
                    api_price.source,
                )
            )
    gpu_rows = tuple((p.gpu_type, p.usd_per_gpu_hour, p.as_of, p.source) for p in parsed.gpu)
    return PriceTable(gpu_rows=gpu_rows, api_rows=tuple(api_rows))

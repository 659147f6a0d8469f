"""warehouse/prices.yaml: GPU list prices and API prices, validated, as rows for DuckDB tables gpu_prices, api_prices.

Prices are informational (self-host vs API); a run's own cost uses its endpoint's usd_per_gpu_hour.
A bad file is refused whole, with the file, the entry and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class PriceTableError(ValueError):
    pass


class _GpuPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu_type: str = Field(min_length=1)
    usd_per_gpu_hour: float = Field(gt=0)
    as_of: date
    source: str = Field(min_length=8)


class _ApiPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    models: list[str] = Field(min_length=1)
    usd_per_mtok_cached_input: float = Field(ge=0)
    usd_per_mtok_uncached_input: float = Field(ge=0)
    usd_per_mtok_output: float = Field(ge=0)
    as_of: date
    source: str = Field(min_length=8)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
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
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise PriceTableError(f"{path}: cannot read the price table: {exc}") from exc
    try:
        parsed = _PriceFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PriceTableError(f"{path}: {where}: {first['msg']}") from None
    gpu_types = [p.gpu_type for p in parsed.gpu]
    if len(set(gpu_types)) != len(gpu_types):
        raise PriceTableError(f"{path}: gpu: a gpu_type is listed twice in {gpu_types}")
    api_rows = []
    seen: dict[str, str] = {}
    for price in parsed.api:
        for model in price.models:
            key = model.lower()
            if key in seen:
                raise PriceTableError(f"{path}: api: model {model!r} is priced by both {seen[key]!r} and {price.name!r}")
            seen[key] = price.name
            api_rows.append(
                (
                    key,
                    price.name,
                    price.usd_per_mtok_cached_input,
                    price.usd_per_mtok_uncached_input,
                    price.usd_per_mtok_output,
                    price.as_of,
                    price.source,
                )
            )
    gpu_rows = tuple((p.gpu_type, p.usd_per_gpu_hour, p.as_of, p.source) for p in parsed.gpu)
    return PriceTable(gpu_rows=gpu_rows, api_rows=tuple(api_rows))

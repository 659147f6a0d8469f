"""warehouse/prices.yaml: GPU list prices, API prices and price books, validated, as rows for the DuckDB
tables gpu_prices, api_prices and price_books.

List and API prices are informational (self-host vs API). A run's own cost uses its endpoint's
usd_per_gpu_hour when the endpoint sets one (an explicit override), else the price book it names
(resolve_gpu_price); the run records which (runs.price_book). The file is $COSTBENCH_PRICES when set (a
user's own, replacing the bundled one whole), else the bundled warehouse/prices.yaml. A bad file is refused
whole, as `<file>: <key path>: <reason>` (common/config_file.py). Every GPU-hour price, quoted or computed
from `own`, is > 0 and at most MAX_USD_PER_GPU_HOUR, as an endpoint's own is (endpoints/spec.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field

from common.config_file import (
    ConfigFileError,
    ConfigModel,
    IsoDate,
    NonEmptyStr,
    SafeName,
    config_error,
    parse_config,
    read_yaml,
)
from endpoints.spec import MAX_USD_PER_GPU_HOUR, EndpointSpec

MAX_USD_PER_MTOK = 10_000.0  # an API price per million tokens (a typo such as 1e308 is refused)


class PriceTableError(ConfigFileError):
    pass


class _GpuPrice(ConfigModel):
    gpu_type: NonEmptyStr
    usd_per_gpu_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    as_of: IsoDate
    source: str = Field(min_length=8)


class _ApiPrice(ConfigModel):
    name: NonEmptyStr
    models: list[NonEmptyStr] = Field(min_length=1)
    usd_per_mtok_cached_input: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    usd_per_mtok_uncached_input: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    usd_per_mtok_output: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    as_of: IsoDate
    source: str = Field(min_length=8)


class _Owning(ConfigModel):
    capex_usd_per_gpu: float = Field(gt=0, le=10_000_000)
    amortisation_years: float = Field(gt=0, le=30)
    power_kw_per_gpu: float = Field(ge=0, le=100)
    pue: float = Field(ge=1, le=5)
    usd_per_kwh: float = Field(ge=0, le=10)
    hosting_usd_per_gpu_month: float = Field(ge=0, le=1_000_000)

    def usd_per_gpu_hour(self) -> float:
        """Every hour of the amortisation paid, used or idle: capex share + power + hosting."""
        return (
            self.capex_usd_per_gpu / (self.amortisation_years * HOURS_PER_YEAR)
            + self.power_kw_per_gpu * self.pue * self.usd_per_kwh
            + self.hosting_usd_per_gpu_month * 12 / HOURS_PER_YEAR
        )


class _PriceBook(ConfigModel):
    name: SafeName
    gpu_type: NonEmptyStr
    kind: Literal["rent_on_demand", "rent_reserved", "own"]
    # rent_*: as quoted; own: computed from `own`
    usd_per_gpu_hour: float | None = Field(None, gt=0, le=MAX_USD_PER_GPU_HOUR)
    own: _Owning | None = None
    as_of: IsoDate
    source: str = Field(min_length=8)
    assumption: bool = False  # true: not read off a public page (`source` says what it assumes)


class _PriceFile(ConfigModel):
    gpu: list[_GpuPrice]
    api: list[_ApiPrice]
    price_books: list[_PriceBook] = []


HOURS_PER_YEAR = 8760.0
PRICES_ENV = "COSTBENCH_PRICES"  # a user's own prices file, replacing the bundled one
ENDPOINT_PRICE = "endpoint"  # runs.price_book of a run whose endpoint set usd_per_gpu_hour itself


@dataclass(frozen=True, slots=True)
class PriceBook:
    name: str
    gpu_type: str
    kind: str  # rent_on_demand | rent_reserved | own
    usd_per_gpu_hour: float
    as_of: object  # datetime.date
    source: str
    assumption: bool


@dataclass(frozen=True, slots=True)
class PriceTable:
    gpu_rows: tuple[tuple, ...]  # (gpu_type, usd_per_gpu_hour, as_of, source)
    api_rows: tuple[tuple, ...]  # (model lower-cased, name, cached, uncached, output, as_of, source)
    books: tuple[PriceBook, ...] = ()
    path: Path | None = None  # the file they were read from

    @property
    def book_rows(self) -> tuple[tuple, ...]:
        """(name, gpu_type, kind, usd_per_gpu_hour, as_of, source, assumption): the price_books table."""
        return tuple(
            (b.name, b.gpu_type, b.kind, b.usd_per_gpu_hour, b.as_of, b.source, b.assumption) for b in self.books
        )


class PriceBookError(PriceTableError):
    pass


def resolve_gpu_price(endpoint: EndpointSpec, table: PriceTable | None = None) -> tuple[float, str]:
    """(usd_per_gpu_hour, price_book) of a run on `endpoint`: its own usd_per_gpu_hour when it sets one
    (price_book 'endpoint'), else its price book's price (the table is loaded when not given)."""
    if endpoint.usd_per_gpu_hour is not None:
        return endpoint.usd_per_gpu_hour, ENDPOINT_PRICE
    if endpoint.price_book is None:
        raise PriceBookError(f"endpoint {endpoint.name!r} sets neither usd_per_gpu_hour nor price_book")
    table = table if table is not None else load_price_table()
    for book in table.books:
        if book.name == endpoint.price_book:
            if book.gpu_type != endpoint.gpu_type:
                raise PriceBookError(
                    f"endpoint {endpoint.name!r} runs on {endpoint.gpu_type} but price book {book.name!r} "
                    f"({table.path}) prices {book.gpu_type}"
                )
            return book.usd_per_gpu_hour, book.name
    known = ", ".join(b.name for b in table.books) or "none"
    raise PriceBookError(
        f"endpoint {endpoint.name!r} names price book {endpoint.price_book!r}, which {table.path} does not list "
        f"(it lists: {known})"
    )


def default_prices_path() -> Path:
    """$COSTBENCH_PRICES when set, else the bundled warehouse/prices.yaml."""
    override = os.environ.get(PRICES_ENV)
    if override:
        return Path(override)
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
    return PriceTable(gpu_rows=gpu_rows, api_rows=tuple(api_rows), books=_books(parsed.price_books, path), path=path)


def _books(entries: list[_PriceBook], path: Path) -> tuple[PriceBook, ...]:
    books: list[PriceBook] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = ("price_books", index)
        if entry.name in seen:
            raise config_error(
                PriceTableError, path, (*where, "name"),
                f"{entry.name!r} is listed twice (first at price_books[{seen[entry.name]}])",
            )  # fmt: skip
        seen[entry.name] = index
        if entry.kind == "own":
            if entry.own is None or entry.usd_per_gpu_hour is not None:
                raise config_error(
                    PriceTableError, path, where, "kind own takes `own` (capex, power, hosting), not usd_per_gpu_hour"
                )
            price = entry.own.usd_per_gpu_hour()
            if price > MAX_USD_PER_GPU_HOUR:  # bounded as a quoted price is
                raise config_error(
                    PriceTableError, path, (*where, "own"),
                    f"computes {price:,.2f} USD per GPU-hour, over the {MAX_USD_PER_GPU_HOUR:,.0f} a price may be "
                    f"(capex_usd_per_gpu {entry.own.capex_usd_per_gpu:g} over amortisation_years "
                    f"{entry.own.amortisation_years:g}, plus power and hosting)",
                    f"price book {entry.name!r}",
                )  # fmt: skip
        else:
            if entry.usd_per_gpu_hour is None or entry.own is not None:
                raise config_error(PriceTableError, path, where, f"kind {entry.kind} takes usd_per_gpu_hour, not `own`")
            price = entry.usd_per_gpu_hour
        books.append(
            PriceBook(entry.name, entry.gpu_type, entry.kind, price, entry.as_of, entry.source, entry.assumption)
        )
    return tuple(books)

"""Numbers as the weekly page writes them: a missing value as a dash, money with its sign before the dollar."""

from __future__ import annotations

import pandas as pd


def pct(share: float | None) -> float | None:
    """A fraction 0-1 as a percentage."""
    return share * 100 if share is not None else None


def fmt(value, spec: str, unit: str = "") -> str:
    """`value` formatted with `spec` and `unit` after it; "—" where there is none."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return f"{format(value, spec)}{unit}"


def usd(value, spec: str) -> str:
    """Money as people write it: the sign before the dollar ("-$0.001293", "+$0.000412"), and a change that rounds to
    nothing at this precision without one ("$0.000000")."""
    text = fmt(value, spec)
    if text == "—":
        return text
    if text[0] in "+-":
        digits = text[1:]
        return f"${digits}" if float(digits.replace(",", "")) == 0 else f"{text[0]}${digits}"
    return f"${text}"

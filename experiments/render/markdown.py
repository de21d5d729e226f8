"""Markdown cells and tables, as every page and section of the harness writes them."""
from __future__ import annotations

import math


def cell(v, spec: str = ".4g") -> str:
    """A table cell: strings as they are, None / NaN as 'n/a', numbers formatted by ``spec``."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return format(v, spec)


def times(v) -> str:
    """A speedup cell: '1.23x', strings as they are, 'n/a' for None / NaN."""
    if isinstance(v, str):
        return v
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else cell(v, ".2f") + "x"


def pm(mean: float, std: float, scale: float = 1, digits: int = 2) -> str:
    """'mean ± std' scaled (e.g. 100 for a percentage); the mean alone where std is None / NaN
    (one seed)."""
    text = f"{mean * scale:.{digits}f}"
    return text if std is None or math.isnan(std) else f"{text} ± {std * scale:.{digits}f}"


def md_table(headers: list, rows: list) -> str:
    lines = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"

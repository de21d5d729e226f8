"""The generated blocks of a page: ``<!-- generated:begin ... -->`` ... ``<!-- generated:end -->``
(and the ``headline``, ``quick``, ``noise`` and ``verdict`` kinds), found and filled, everything outside them kept byte
for byte; markers that do not pair up are one line of error."""
from __future__ import annotations


KINDS = ("generated", "headline", "quick", "noise", "verdict")  # <!-- generated:begin -->, generated:headline:begin, ...


class MarkerError(ValueError):
    """A page whose generated-block markers do not pair up (the message is one line)."""


def _begin(kind: str) -> str:
    return "<!-- generated:begin" if kind == "generated" else f"<!-- generated:{kind}:begin"


def _end(kind: str) -> str:
    return "<!-- generated:end -->" if kind == "generated" else f"<!-- generated:{kind}:end -->"


def blocks(text: str, where: str = "page") -> dict:
    """{kind: (index of its begin line, index of its end line)} of the page's blocks; MarkerError
    for a begin without an end, an end without a begin, a block opened twice or inside another."""
    out, open_ = {}, None
    for i, line in enumerate(text.splitlines()):
        s = line.strip()
        for kind in KINDS:
            if s.startswith(_begin(kind)):
                if open_ is not None:
                    raise MarkerError(f"{where}:{i + 1}: {_begin(kind)} inside the {open_[0]} block "
                                      f"begun on line {open_[1] + 1} (no {_end(open_[0])} before it)")
                if kind in out:
                    raise MarkerError(f"{where}:{i + 1}: a second {_begin(kind)} block")
                open_ = (kind, i)
            elif s == _end(kind):
                if open_ is None or open_[0] != kind:
                    raise MarkerError(f"{where}:{i + 1}: {_end(kind)} without {_begin(kind)} ... --> before it")
                out[kind], open_ = (open_[1], i), None
    if open_ is not None:
        raise MarkerError(f"{where}:{open_[1] + 1}: {_begin(open_[0])} ... --> without "
                          f"{_end(open_[0])} after it")
    return out


def fill(text: str, contents: dict, where: str = "page") -> str:
    """The page with each block named in ``contents`` holding that text (between a blank line
    after its begin marker and one before its end marker); the rest byte for byte."""
    lines = text.splitlines(keepends=True)
    for kind, (b, e) in sorted(blocks(text, where).items(), key=lambda kv: -kv[1][0]):
        if contents.get(kind) is not None:
            body = contents[kind].rstrip("\n")
            lines[b + 1:e] = ["\n", *(x + "\n" for x in body.split("\n")), "\n"]
    return "".join(lines)


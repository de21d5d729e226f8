"""The documentation's links hold: every relative markdown link in README.md, docs/*.md and
results/**/README.md names a file inside this repository that exists (and, for a link to a
heading of a markdown file, a heading that exists), and no file of the repository still points at
the old specification outside it (the specification is docs/methods.md). Reads text files only:
well under a second."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the old location of the specification, outside the repository (split so that this file does
# not mention it itself)
FORBIDDEN = ("../shared/" + "docs", "shared/docs/" + "METHODS.md")
SCANNED = (".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".ini")
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "data", "runs"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with inline code spans removed."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, _CODE.sub("", line)


def links(text: str):
    """(line number, target) of every inline link, image and reference definition."""
    for n, line in prose_lines(text):
        for m in _INLINE.finditer(line):
            yield n, m.group(1)
        m = _REFDEF.match(line)
        if m:
            yield n, m.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, lower case, spaces -> '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else f"{base}-{k}")
    return out


def broken_links(files, root: Path = ROOT) -> list[str]:
    """'file:line: target (why)' for every relative link that does not resolve inside ``root``."""
    root = root.resolve()
    bad = []
    for f in files:
        f = Path(f)
        for n, target in links(f.read_text(encoding="utf-8")):
            if _SCHEME.match(target):  # http:, https:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f.resolve()
            where = f"{f.relative_to(root)}:{n}: {target}"
            if dest != root and root not in dest.parents:
                bad.append(f"{where} (outside the repository)")
            elif not dest.exists():
                bad.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
                bad.append(f"{where} (no heading with that anchor)")
    return bad


def repo_files(root: Path = ROOT) -> list[Path]:
    """Files git tracks or would track (untracked but not ignored); every file when git can't say."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                             capture_output=True, text=True, timeout=10, check=True).stdout
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")]
            names += [os.path.relpath(os.path.join(d, x), root) for x in fs]
    return [root / n for n in names if n.endswith(SCANNED) and not n.startswith(".venv/")]


def forbidden_mentions(files, root: Path = ROOT) -> list[str]:
    bad = []
    for f in files:
        try:
            text = Path(f).read_text(encoding="utf-8", errors="replace")
        except OSError:  # listed by git but deleted in the working tree
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for s in FORBIDDEN:
                if s in line:
                    bad.append(f"{Path(f).relative_to(root)}:{n}: mentions {s}")
    return bad


def documentation() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "results").glob("**/README.md"))]


# -- the repository ---------------------------------------------------------------------------
def test_every_relative_link_resolves():
    files = [f for f in documentation() if f.exists()]
    assert (ROOT / "docs" / "methods.md") in files
    bad = broken_links(files)
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_nothing_points_at_the_old_specification():
    bad = forbidden_mentions(repo_files())
    assert not bad, "cite docs/methods.md instead:\n" + "\n".join(bad)


# -- the checks themselves can fail -----------------------------------------------------------
def test_the_checks_catch_what_they_are_for(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## 4. DIGEST: stale rows (seed paper)\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#4-digest-stale-rows-seed-paper) [ok](#title-here)\n"
        "[web](https://example.org/x) `[in code](missing.md)`\n"
        "```\n[in a block](missing.md)\n```\n"
        "# Title here\n"
        "[gone](docs/missing.md)\n"
        "[bad anchor](docs/a.md#5-varco)\n"
        "[escapes](../outside.md)\n"
        "[ref]: docs/nothing.md\n")
    bad = broken_links([page], tmp_path)
    assert [b.split(": ", 1)[1] for b in bad] == [
        "docs/missing.md (no such file)", "docs/a.md#5-varco (no heading with that anchor)",
        "../outside.md (outside the repository)", "docs/nothing.md (no such file)"], bad
    assert [b.split(":")[1] for b in bad] == ["7", "8", "9", "10"]

    old = tmp_path / "x.py"
    old.write_text('"""As ' + FORBIDDEN[0] + '/METHODS.md says."""\nfine = "docs/methods.md"\n')
    assert forbidden_mentions([old], tmp_path) == [f"x.py:1: mentions {FORBIDDEN[0]}",
                                                   f"x.py:1: mentions {FORBIDDEN[1]}"]


def test_slugs_follow_github():
    assert slug("8.1 PipeGCN: one step stale (Wan et al., ICLR 2022)") == \
        "81-pipegcn-one-step-stale-wan-et-al-iclr-2022"
    assert slug("DIGEST-A (section 4, last bullets)") == "digest-a-section-4-last-bullets"
    assert slug("What `metrics.csv` holds") == "what-metricscsv-holds"

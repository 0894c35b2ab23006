"""The README and the documentation site (docs/, mkdocs.yml), read as text: no
server, no MkDocs. CI also builds the site with `mkdocs build --strict`, which
checks every link between pages; these checks run with the unit tests.

- The README is a front door: at most 300 lines, and every relative link in
  it names a file of the repository (and a heading of it, for `#anchor`s).
- Every link between the pages of docs/ names a page or a file of docs/:
  MkDocs knows nothing outside it.
- Every benchmark table says the commit and the date it was measured on: each
  table of docs/benchmarks.md, and each table of another page whose section
  runs a script of bench/ before it, is preceded in its section by a line
  naming both ("measured on 2026-11-26 at commit 15d8c58").
- Every page of docs/ is in mkdocs.yml's nav.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"(#{1,6}) (.*)")
# A commit named as such ("commit 15d8c58", "commits 5628abb and ..."): a bare run
# of hex digits would also match "1000000".
COMMIT = re.compile(r"\bcommits? `?([0-9a-f]{7,40})\b")
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text with fenced code blocks blanked out."""
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
        else:
            out.append("" if fence else line)
    return out


def links(text: str) -> list[str]:
    """Link and image targets outside code (fenced blocks and `spans`)."""
    prose = "\n".join(prose_lines(text))
    prose = re.sub(r"`[^`]*`", "", prose)
    return LINK.findall(prose)


def slug(heading: str) -> str:
    """A heading's anchor, as MkDocs' toc (and, for ours, GitHub) makes it."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    return {
        slug(m.group(2))
        for line in prose_lines(path.read_text())
        if (m := HEADING.fullmatch(line.rstrip()))
    }


def relative_targets(text: str) -> list[str]:
    return [t for t in links(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken_links(page: Path, root: Path) -> list[str]:
    """The relative links of `page` that name no file under `root`, or no
    heading of the Markdown file they name."""
    broken = []
    for target in relative_targets(page.read_text()):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(root.resolve()) or not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    return broken


def tables(lines: list[str]) -> list[int]:
    """The index of the first line of each Markdown table."""
    starts = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and (i == 0 or not lines[i - 1].lstrip().startswith("|")):
            starts.append(i)
    return starts


def names_commit_and_date(line: str) -> bool:
    if not COMMIT.search(line):
        return False
    for date in DATE.findall(line):
        try:
            datetime.date.fromisoformat(date)
        except ValueError:
            continue
        return True
    return False


def undated_tables(text: str, every_table: bool) -> list[str]:
    """The tables (their first line) not preceded in their section (since the
    last heading) by a line naming a commit and a date. With every_table False,
    only the tables whose section names a bench/ script before them count."""
    lines = prose_lines(text)
    undated = []
    for start in tables(lines):
        section: list[str] = []
        for line in reversed(lines[:start]):
            if HEADING.fullmatch(line.rstrip()):
                break
            if not line.lstrip().startswith("|"):
                section.append(line)
        if not every_table and not any("bench/" in line for line in section):
            continue
        if not any(names_commit_and_date(line) for line in section):
            undated.append(f"line {start + 1}: {lines[start].strip()[:60]}")
    return undated


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move some to docs/"


def test_every_relative_link_in_the_readme_names_a_file() -> None:
    targets = relative_targets(README.read_text())
    assert len(targets) >= 10, targets  # the links to docs/ are there
    assert broken_links(README, ROOT) == []


def test_every_link_between_pages_names_a_page_or_file_of_docs() -> None:
    broken = {page.name: broken_links(page, DOCS) for page in sorted(DOCS.glob("*.md"))}
    assert {name: b for name, b in broken.items() if b} == {}


def test_every_benchmark_table_says_its_commit_and_date() -> None:
    text = (DOCS / "benchmarks.md").read_text()
    assert len(tables(prose_lines(text))) >= 8
    assert undated_tables(text, every_table=True) == []
    for page in sorted(DOCS.glob("*.md")):
        assert undated_tables(page.read_text(), every_table=False) == [], page.name


def test_the_commits_named_by_the_benchmark_tables_exist() -> None:
    git = ["git", "-C", str(ROOT)]
    try:
        shallow = subprocess.run(
            [*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
        )
    except FileNotFoundError:
        pytest.skip("no git")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git clone: old commits may be missing")
    named = {
        commit
        for page in DOCS.glob("*.md")
        for line in prose_lines(page.read_text())
        if names_commit_and_date(line)
        for commit in COMMIT.findall(line)
    }
    assert len(named) >= 8
    missing = [
        c
        for c in sorted(named)
        if subprocess.run([*git, "cat-file", "-e", f"{c}^{{commit}}"]).returncode != 0
    ]
    assert missing == []


def test_every_page_is_in_the_nav() -> None:
    nav = set(
        re.findall(r"^\s*- (?:[^:\n]+: )?(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    )
    pages = {page.name for page in DOCS.glob("*.md")}
    assert pages - nav == set()
    assert nav - pages == set()


# The checks themselves: each must be able to fail.

DATED = """# Figures

## One

`python bench/x.py` (2 cores;
measured on 2026-11-26 at commit 15d8c58):

| a | b |
| --- | --- |
| 1 | 2 |

| c | d |
| --- | --- |
| 3 | 4 |
"""


def test_a_table_with_its_commit_and_date_passes() -> None:
    assert undated_tables(DATED, every_table=True) == []


@pytest.mark.parametrize(
    "line",
    [
        "measured on 2026-11-26",  # no commit
        "measured at commit 15d8c58",  # no date
        "measured on 2026-11-26 at 15d8c58",  # hex digits, not named as a commit
        "measured on 2026-13-40 at commit 15d8c58",  # not a date
        "measured on 2026-11-26 at commit 15d8c",  # too short for a commit
    ],
)
def test_a_table_without_both_on_one_line_fails(line: str) -> None:
    text = DATED.replace("measured on 2026-11-26 at commit 15d8c58", line)
    assert undated_tables(text, every_table=True) != []


def test_the_commit_and_date_of_another_section_do_not_count() -> None:
    text = DATED + "\n## Two\n\n`python bench/y.py`:\n\n| e |\n| --- |\n| 5 |\n"
    assert undated_tables(text, every_table=True) == ["line 20: | e |"]
    assert undated_tables(text, every_table=False) == ["line 20: | e |"]


def test_a_table_of_another_page_counts_only_after_a_bench_script() -> None:
    text = "# Keys\n\n| key | action |\n| --- | --- |\n| q | quit |\n"
    assert undated_tables(text, every_table=False) == []
    assert undated_tables(text, every_table=True) != []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Set up\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#set-up) [web](https://example.com) `[code](x.md)`\n"
        "[gone](c.md) [no anchor](a.md#setup) [outside](../x.md)\n"
    )
    assert broken_links(page, tmp_path) == ["c.md", "a.md#setup", "../x.md"]

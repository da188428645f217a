"""The user guide's code runs: every ```python block of each docs/*.md page, in order,
in one namespace per page, in a fresh empty working directory. One test per page, so a
new page is picked up without touching this file.

The tags a block may carry after ``python`` (docs/index.md, "About the code on these
pages", tells readers the same):

* none: the block runs.
* ``no-run``: shown, never run (use sparingly: a block that runs cannot rot).
* ``postgresql``: runs only when ``KVZARR_TEST_POSTGRES_URL`` names a server (CI sets
  it), else it is skipped, so later blocks must not depend on it. The placeholder URL
  :data:`PLACEHOLDER_URL` in it is replaced by that server, in a schema of its own that
  is dropped afterwards (pages never meet each other's or the suite's tables).
* ``file=PATH``: the block shows a whole program of the repository (an example); it is
  not run here but must equal that file, which ``tests/test_examples.py`` runs.

Blocks fenced with anything but ``python`` (``sh``, ``console``, ``text``) are not run.
A failing block's traceback names the page and the line in it.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))

#: the PostgreSQL URL pages write in ``postgresql`` blocks
PLACEHOLDER_URL = "postgresql://me@dbserver/science"
#: every tag a block may carry; anything else is a mistake in the page
TAGS = {"no-run", "postgresql", "file"}

_FENCE = re.compile(r"^```(\S*)\s*(.*)$")


@dataclass
class Block:
    page: str
    line: int            # line of the first code line in the page (1-based)
    language: str
    tags: dict[str, str]
    code: str


def parse_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page (top-level fences: a line starting with
    three backticks opens a block, a line of only three backticks closes it)."""
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        language, rest = m.group(1), m.group(2)
        tags = {}
        for word in rest.split():
            name, _, value = word.partition("=")
            tags[name] = value
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page.name}:{i + 1}: code block never closed")
        blocks.append(Block(page.name, start + 1, language, tags,
                            "\n".join(lines[start:end]) + "\n"))
        i = end + 1
    return blocks


@pytest.fixture
def postgres_url():
    """A URL of the test server whose tables land in a fresh schema, dropped afterwards;
    None when no server is configured."""
    base = os.environ.get("KVZARR_TEST_POSTGRES_URL")
    if not base:
        yield None
        return
    import psycopg2           # a test dependency; libpq takes the URL as it is

    schema = f"docs_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(base)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE SCHEMA "{schema}"')
        separator = "&" if "?" in base else "?"
        try:
            yield f"{base}{separator}options=-csearch_path%3D{schema}"
        finally:
            with admin.cursor() as cur:
                cur.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        admin.close()


@pytest.mark.parametrize("page", PAGES)
def test_code_on_the_page_runs(page, tmp_path, monkeypatch, request):
    blocks = [b for b in parse_blocks(DOCS / page) if b.language == "python"]
    postgres_url = (request.getfixturevalue("postgres_url")
                    if any("postgresql" in b.tags for b in blocks) else None)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{Path(page).stem.replace('-', '_')}"}
    for block in blocks:
        unknown = set(block.tags) - TAGS
        assert not unknown, f"{page}:{block.line}: unknown code block tags {sorted(unknown)}"
        if "file" in block.tags:
            program = REPO / block.tags["file"]
            assert program.is_file(), f"{page}:{block.line}: no such file {program}"
            assert block.code.strip() == program.read_text(encoding="utf-8").strip(), (
                f"{page}:{block.line}: the block differs from {block.tags['file']}: copy "
                f"the program into the page again")
            continue
        if "no-run" in block.tags:
            continue
        code = block.code
        if "postgresql" in block.tags:
            if postgres_url is None:
                continue
            assert PLACEHOLDER_URL in code, (
                f"{page}:{block.line}: a postgresql block names the server as "
                f"{PLACEHOLDER_URL}")
            code = code.replace(PLACEHOLDER_URL, postgres_url)
        # blank lines in front: a traceback shows the page's own line numbers
        exec(compile("\n" * (block.line - 1) + code, str(DOCS / page), "exec"), namespace)


def test_blocks_are_parsed_with_their_tags_and_lines(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# T\n\n```python\nx = 1\n```\n\ntext\n\n```python no-run\nboom()\n```\n"
                    "```sh\nls\n```\n```python file=examples/quickstart.py\nprint()\n```\n")
    blocks = parse_blocks(page)
    assert [(b.line, b.language, b.tags, b.code) for b in blocks] == [
        (4, "python", {}, "x = 1\n"),
        (10, "python", {"no-run": ""}, "boom()\n"),
        (13, "sh", {}, "ls\n"),
        (16, "python", {"file": "examples/quickstart.py"}, "print()\n")]


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")

@pytest.mark.parametrize("page", PAGES)
def test_relative_links_on_the_page_lead_somewhere(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    dead = []
    for target in _LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (DOCS / target).resolve().exists():
            dead.append(target)
    assert not dead, f"{page}: links to nothing: {dead}"

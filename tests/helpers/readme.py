"""Parse the commands out of README.md and the docs site.

README.md: every line of every ``bash`` block, and every ``python benchmarks/...`` command in a table's first
column. ``docs/**/*.md``: every line of every ``bash`` block marked ``<!-- ci:run -->`` on the line before its
fence; a docs ``bash`` block must carry that marker or ``<!-- ci:no-run: <reason> -->`` (a command that cannot run
on a CI machine, such as ``kubectl``), so no block goes untested by accident. Backslash continuations are joined
and trailing ``# comments`` dropped."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
RUN_MARK = "<!-- ci:run -->"
NO_RUN_MARK = re.compile(r"<!-- ci:no-run: \S.* -->")


def _strip_comment(line: str) -> str:
    """Drop a trailing shell comment (a ``#`` outside quotes that starts a word)."""
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _open_quote(text: str) -> bool:
    """Whether ``text`` ends inside a single- or double-quoted string (comments outside quotes ignored)."""
    quote: str | None = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return False
    return quote is not None


def readme_commands(text: str | None = None) -> list[str]:
    """Every command the README shows, in order of appearance (a quoted string may span lines)."""
    return _commands(README.read_text() if text is None else text, marked_only=False)


def docs_commands(docs: Path = DOCS) -> list[str]:
    """Every command of every ``<!-- ci:run -->`` block in ``docs/**/*.md``, file by file in sorted order."""
    out: list[str] = []
    for page in sorted(docs.rglob("*.md")):
        out += _commands(page.read_text(), marked_only=True)
    return out


def unmarked_docs_blocks(docs: Path = DOCS) -> list[str]:
    """``page:line`` of every docs ``bash`` block with neither marker on the line before its fence."""
    bad = []
    for page in sorted(docs.rglob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() in ("```bash", "```sh"):
                before = lines[i - 1].strip() if i else ""
                if before != RUN_MARK and not NO_RUN_MARK.fullmatch(before):
                    bad.append(f"{page.relative_to(REPO)}:{i + 1}")
    return bad


def all_commands() -> list[str]:
    """The README's commands, then the docs' marked ones not already in the README, each once."""
    out: list[str] = []
    for cmd in readme_commands() + docs_commands():
        if cmd not in out:
            out.append(cmd)
    return out


def _commands(text: str, marked_only: bool) -> list[str]:
    out: list[str] = []
    in_bash, buf, prev = False, "", ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("```"):
            opening = (not in_bash) and line.strip() in ("```bash", "```sh")
            in_bash = opening and (not marked_only or prev.strip() == RUN_MARK)
            buf, prev = "", line
            continue
        prev = line
        if in_bash:
            if buf and _open_quote(buf):
                buf += "\n" + line
                if _open_quote(buf):
                    continue
                joined = buf
            else:
                joined = buf + line.strip()
            if joined.endswith("\\"):
                buf = joined[:-1].rstrip() + " "
                continue
            if _open_quote(joined):
                buf = joined
                continue
            buf = ""
            if cmd := _strip_comment(joined):
                out.append(cmd)
        elif line.startswith("|") and not marked_only:
            first = line.split("|")[1].strip()
            m = re.fullmatch(r"`(python benchmarks/[^`]+)`", first)
            if m:
                out.append(m.group(1))
    return out


def words(cmd: str) -> list[str]:
    return shlex.split(cmd)

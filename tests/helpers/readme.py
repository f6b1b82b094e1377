"""Parse the commands out of README.md: every line of every ``bash`` block, and every ``python benchmarks/...``
command in a table's first column. Backslash continuations are joined and trailing ``# comments`` dropped."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


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
    text = README.read_text() if text is None else text
    out: list[str] = []
    in_bash, buf = False, ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("```"):
            in_bash = (not in_bash) and line.strip() in ("```bash", "```sh")
            buf = ""
            continue
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
        elif line.startswith("|"):
            first = line.split("|")[1].strip()
            m = re.fullmatch(r"`(python benchmarks/[^`]+)`", first)
            if m:
                out.append(m.group(1))
    return out


def words(cmd: str) -> list[str]:
    return shlex.split(cmd)

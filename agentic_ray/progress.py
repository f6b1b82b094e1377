"""Progress of a training run: stage messages, and a bar with ETA and the latest metrics for each long step.

The pipeline reports through a :class:`RunProgress`: ``say(message)`` for one-off lines and ``task(name,
total)`` for a counted step (demonstration collection, imitation epochs, RL and reflection iterations,
evaluation episodes), whose ``advance(**metrics)`` moves the bar and shows the latest figures.

* :class:`RichProgress` (an interactive terminal): rich's live bars with elapsed time, ETA and metrics.
* :class:`PlainProgress` (anything else: ``ray job logs``, a file, a pipe): plain lines, no escape codes, at
  most one per task every ``interval_s`` seconds plus the last. Rich itself is not used there because off a
  terminal it prints a bar only when it stops (verified with rich 15: nothing while a 60 s step runs).

:func:`make_progress` picks one for a stream; :func:`as_progress` also accepts a plain ``say`` callable (what
the pipeline took before), which then receives the plain lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO


class ProgressTask(Protocol):
    """One counted step; use as a context manager so the bar closes on errors too."""

    def advance(self, n: int = 1, **metrics: Any) -> None:
        """``n`` more units done; ``metrics`` are shown as the latest figures (numbers or short text)."""
        ...

    def close(self) -> None:
        """The step is over (whether or not every unit was done)."""
        ...

    def __enter__(self) -> ProgressTask: ...

    def __exit__(self, *exc: object) -> None: ...


class RunProgress(Protocol):
    """What the pipeline reports to."""

    def say(self, message: str) -> None:
        """One line of text."""
        ...

    def task(self, name: str, total: int, unit: str = "", done: int = 0) -> ProgressTask:
        """Start a counted step of ``total`` units (``done`` already done, e.g. on resume)."""
        ...


def format_metrics(metrics: dict[str, Any]) -> str:
    """``{"nll": 1.23456, "stage": "rl"}`` → ``"nll 1.235  stage rl"`` (floats to 4 significant digits)."""
    parts = []
    for k, v in metrics.items():
        if v is None:
            continue
        parts.append(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}")
    return "  ".join(parts)


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class _PlainTask:
    def __init__(self, owner: PlainProgress, name: str, total: int, unit: str, done: int) -> None:
        self.owner, self.name, self.total, self.unit = owner, name, max(0, total), unit
        self.done, self.start_done = done, done
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.metrics: dict[str, Any] = {}
        self.closed = False

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate_done = self.done - self.start_done
        eta = elapsed / rate_done * (self.total - self.done) if rate_done > 0 else None
        unit = f" {self.unit}" if self.unit else ""
        head = f"[{self.name}] {self.done}/{self.total}{unit} ({pct:.0f}%)  elapsed {_duration(elapsed)}"
        if self.done < self.total:
            head += f"  eta {_duration(eta) if eta is not None else '?'}"
        m = format_metrics(self.metrics)
        return f"{head}  | {m}" if m else head

    def advance(self, n: int = 1, **metrics: Any) -> None:
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        self.metrics.update(metrics)
        now = time.monotonic()
        if self.done >= self.total or now - self.last_line >= self.owner.interval_s:
            self.last_line = now
            self.owner.write(self.line())
            if self.done >= self.total:
                self.closed = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.owner.write(self.line())

    def __enter__(self) -> _PlainTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PlainProgress:
    """Plain periodic lines (no escape codes), for logs and pipes.

    Args:
        write: where each line goes (default: print to stdout, flushed).
        interval_s: at most one line per task this often (the last one always comes).
    """

    def __init__(self, write: Callable[[str], None] | None = None, interval_s: float = 10.0) -> None:
        self.write = write or (lambda line: print(line, flush=True))
        self.interval_s = interval_s

    def say(self, message: str) -> None:
        self.write(message)

    def task(self, name: str, total: int, unit: str = "", done: int = 0) -> _PlainTask:
        return _PlainTask(self, name, total, unit, done)


class _RichTask:
    def __init__(self, owner: RichProgress, name: str, total: int, unit: str, done: int) -> None:
        self.owner, self.name, self.unit = owner, name, unit
        self.t0 = time.monotonic()
        self.total, self.done = max(total, 0), done
        self.metrics: dict[str, Any] = {}
        self.closed = False
        self.id = owner.bars().add_task(name, total=max(total, 1), completed=done, unit=unit, metrics="")

    def advance(self, n: int = 1, **metrics: Any) -> None:
        self.done += n
        self.metrics.update(metrics)
        self.owner.bars().update(self.id, advance=n, metrics=format_metrics(self.metrics))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.owner.finish(self)

    def __enter__(self) -> _RichTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RichProgress:
    """rich bars on an interactive terminal, one per open task (a step inside a step gets its own row);
    a finished task leaves one summary line, and ``say`` prints above the bars."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console

        self.console = Console(file=stream or sys.stdout)
        self._bars: Any = None
        self._open = 0

    def bars(self) -> Any:
        if self._bars is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bars = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[metrics]}"),
                console=self.console,
                transient=True,  # the bars go when the last task closes; each left its summary line
            )
            self._bars.start()
        return self._bars

    def task(self, name: str, total: int, unit: str = "", done: int = 0) -> _RichTask:
        self._open += 1
        return _RichTask(self, name, total, unit, done)

    def finish(self, task: _RichTask) -> None:
        bars = self.bars()
        bars.remove_task(task.id)
        m = format_metrics(task.metrics)
        line = (
            f"[{task.name}] {task.done}/{task.total} {task.unit} in {_duration(time.monotonic() - task.t0)}"
        )
        self.say(f"{line}  | {m}" if m else line)
        self._open -= 1
        if self._open == 0:
            bars.stop()
            self._bars = None

    def say(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)


def make_progress(stream: TextIO | None = None, interval_s: float = 10.0) -> RunProgress:
    """rich bars when ``stream`` (default stdout) is a terminal, plain periodic lines otherwise."""
    stream = stream or sys.stdout
    if stream.isatty():
        return RichProgress(stream)
    return PlainProgress(lambda line: print(line, file=stream, flush=True), interval_s)


def as_progress(progress: RunProgress | Callable[[str], None]) -> RunProgress:
    """A :class:`RunProgress` as is; a ``say(message)`` callable becomes plain lines into that callable."""
    if hasattr(progress, "task") and hasattr(progress, "say"):
        return progress  # type: ignore[return-value]
    return PlainProgress(progress)  # type: ignore[arg-type]

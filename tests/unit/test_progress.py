"""Progress reporting: rich bars on a terminal, plain periodic lines elsewhere (no Ray)."""

from __future__ import annotations

import io
import re

from agentic_ray.progress import PlainProgress, RichProgress, as_progress, make_progress

ESC = re.compile(r"\x1b|\r")


def test_plain_lines_have_eta_metrics_and_no_escape_codes():
    lines: list[str] = []
    p = PlainProgress(lines.append, interval_s=0.0)
    with p.task("rl iterations", 4, "iterations") as bar:
        for i in range(4):
            bar.advance(env_steps=512 * (i + 1), policy_loss=0.123456)
    assert len(lines) == 4
    assert lines[0].startswith("[rl iterations] 1/4 iterations (25%)") and " eta " in lines[0]
    assert "env_steps 512  policy_loss 0.1235" in lines[0]
    assert lines[-1].startswith("[rl iterations] 4/4 iterations (100%)") and " eta " not in lines[-1]
    assert not any(ESC.search(line) for line in lines)


def test_plain_lines_are_throttled_but_the_last_always_comes():
    lines: list[str] = []
    p = PlainProgress(lines.append, interval_s=3600.0)
    with p.task("il imitation", 24, "epochs") as bar:
        for _ in range(24):
            bar.advance(nll=1.0)
    assert lines == [lines[-1]] and lines[-1].startswith("[il imitation] 24/24 epochs (100%)")
    with p.task("il demonstrations", 10, "demos") as bar:  # closed early (an error): still one line
        bar.advance(3)
    assert lines[-1].startswith("[il demonstrations] 3/10 demos (30%)")


def test_make_progress_picks_plain_off_a_terminal_and_as_progress_wraps_a_callable():
    buf = io.StringIO()
    p = make_progress(buf, interval_s=0.0)
    assert isinstance(p, PlainProgress)
    with p.task("evaluation", 2, "episodes") as bar:
        bar.advance()
        bar.advance()
    p.say("done")
    out = buf.getvalue().splitlines()
    assert (
        out[-1] == "done"
        and out[-2].startswith("[evaluation] 2/2 episodes")
        and not ESC.search(buf.getvalue())
    )
    said: list[str] = []
    q = as_progress(said.append)
    q.say("hello")
    with q.task("x", 1) as bar:
        bar.advance()
    assert said[0] == "hello" and said[1].startswith("[x] 1/1")
    assert as_progress(p) is p


def test_rich_nested_tasks_leave_one_summary_line_each():
    buf = io.StringIO()
    r = RichProgress(buf)
    with r.task("rl iterations", 2, "iterations") as outer:
        with r.task("rl evaluation", 3, "episodes") as inner:
            for _ in range(3):
                inner.advance()
        outer.advance(2, policy_loss=0.5)
    text = buf.getvalue()
    assert "[rl evaluation] 3/3 episodes" in text and "[rl iterations] 2/2 iterations" in text
    assert "policy_loss 0.5" in text and r._bars is None  # the live display stopped with the last task

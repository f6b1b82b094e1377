"""The generated documentation shows exactly the benchmarks' recorded figures, and no docs command block goes
untested by accident.

The README's headline table and the results pages are generated from ``benchmarks/results/*.json`` by
``docs/gen_pages.py``; these tests fail when the README's table was edited by hand or went stale, when a results
page shows a figure other than its record's, or when a ``bash`` block in ``docs/`` carries no ``ci:`` marker.
``mkdocs build --strict`` itself is the README's command, run by ``tests/integration/test_readme_commands.py``.
"""

from __future__ import annotations

import json
import re
import runpy
import subprocess
from pathlib import Path

from benchmarks.results_record import load_records, publish
from tests.helpers.readme import README, REPO, unmarked_docs_blocks

GEN = runpy.run_path(str(REPO / "docs" / "gen_pages.py"), run_name="gen_pages")


def _table_cells(page: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in page.splitlines()
        if line.startswith("|") and not set(line) <= set("|-: ")
    ]


def _figures_on_page(page: str) -> dict[str, str]:
    """``{figure: value}`` from a one-row results page's ``| `figure` | value |`` table."""
    return {c[0].strip("`"): c[1] for c in _table_cells(page) if len(c) == 2 and c[0].startswith("`")}


def test_readme_headline_table_is_generated_from_the_records() -> None:
    block = GEN["readme_block"](README.read_text())
    assert block == GEN["readme_table"](), (
        "README.md's results table differs from the records: run `python docs/gen_pages.py --readme`"
    )


def test_every_record_has_a_page_with_its_figures() -> None:
    records = load_records()
    pages = GEN["results_pages"](records)
    for name, rec in records.items():
        page = pages[f"{name}.md"]
        assert f"`{rec['command']}`" in page, name
        if len(rec["rows"]) == 1:
            shown = _figures_on_page(page)
            for key, value in rec["rows"][0].items():
                assert shown.get(key) == GEN["fmt"](value), (name, key, shown.get(key), value)


def test_a_page_that_differs_from_its_record_is_caught(tmp_path: Path, monkeypatch) -> None:
    """The check above, on a record made here: it passes on the generated page and fails on an altered one."""
    monkeypatch.setenv("AGENTIC_RAY_RESULTS_DIR", str(tmp_path))
    publish(
        "env_throughput", [{"steps_per_s": 1234.5, "expert_success": 1.0, "note": "x"}], argv=["--steps", "9"]
    )
    rec = load_records(tmp_path)["env_throughput"]
    page = GEN["result_page"]("env_throughput", rec)
    assert _figures_on_page(page) == {"steps_per_s": "1234.5", "expert_success": "1.0", "note": "x"}
    assert "python benchmarks/env_throughput.py --steps 9" in page
    altered = page.replace("1234.5", "1243.5")
    assert _figures_on_page(altered)["steps_per_s"] != GEN["fmt"](rec["rows"][0]["steps_per_s"])


def test_the_readme_table_marks_missing_records_and_the_page_marks_stale_ones(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("AGENTIC_RAY_RESULTS_DIR", str(tmp_path))
    publish("env_throughput", [{"steps_per_s": 99.0, "expert_success": 1.0, "random_success": 0.0}], argv=[])
    records = load_records(tmp_path)
    table = GEN["readme_table"](records)
    row = next(line for line in table.splitlines() if "e-commerce" in line)
    assert "steps_per_s 99.0" in row and "docs/results/env_throughput.md" in row
    assert "not recorded yet" in next(line for line in table.splitlines() if "Quickstart" in line)
    # The README's table does not depend on the clone's git state (a CI run failed when a commit to agentic_ray
    # after a record changed the README's generated table); the row's page says whether the figure is stale.
    records["env_throughput"]["commit"] = "0" * 40  # a commit this clone does not have
    assert GEN["readme_table"](records) == table
    assert "**commit unknown**" in GEN["result_page"]("env_throughput", records["env_throughput"])
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    records["env_throughput"]["commit"] = head
    records["env_throughput"]["uncommitted_changes"] = True
    assert "**the code has changed since" in GEN["result_page"]("env_throughput", records["env_throughput"])


def test_records_are_json_with_their_command() -> None:
    for path in sorted((REPO / "benchmarks" / "results").glob("*.json")):
        data = json.loads(path.read_text())
        if "rows" in data:
            assert re.fullmatch(r"python benchmarks/\w+\.py.*", data["command"]), path


def test_every_docs_bash_block_is_marked() -> None:
    assert unmarked_docs_blocks() == [], "mark each block <!-- ci:run --> or <!-- ci:no-run: <reason> -->"


def test_the_reward_layer_table_lists_every_registered_layer_as_it_is() -> None:
    """docs/concepts/reward-pool.md's layer table has one row per registered layer, with the class's stream,
    granularity, where it runs and default weight (five layers were missing from it for three sessions)."""
    from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass

    runs = {
        CostClass.SYNC: "inline",
        CostClass.ASYNC_CPU: "CPU actor group",
        CostClass.ASYNC_IO: "async I/O actor group",
    }
    page = (REPO / "docs" / "concepts" / "reward-pool.md").read_text()
    rows = {c[0].strip("`"): c for c in _table_cells(page) if len(c) == 6 and c[0].startswith("`")}
    assert set(rows) == set(LAYER_CLASSES)
    for name, cls in LAYER_CLASSES.items():
        _, _, stream, granularity, where, weight = rows[name]
        assert (stream.strip("*"), granularity, where, float(weight)) == (
            cls.stream.value,
            cls.granularity.value,
            runs[cls.cost],
            cls.default_weight,
        ), name

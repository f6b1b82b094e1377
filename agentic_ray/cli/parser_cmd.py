"""``agentic-ray parser train | parse``: build a domain's goal parser from its renderings, and try it on text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import UserError, registered_domain

parser_app = typer.Typer(help="The goal parser: customer text to a goal DAG.", no_args_is_help=True)
app.add_typer(parser_app, name="parser")


@parser_app.command("train")
def parser_train(
    domain: Annotated[str, typer.Option(help="Registered domain whose renderings to train on.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Folder to write the parser to (default: the domain's data/goal_parser)."),
    ] = None,
    per_family: Annotated[int, typer.Option(help="Rendered training tasks per family.")] = 80,
    seed: Annotated[int, typer.Option(help="Seed of the task draws and renderings.")] = 0,
    heldout: Annotated[
        int, typer.Option(help="Held-out tasks per family to score after training (0: none).")
    ] = 0,
) -> None:
    """Train the goal parser of a domain from its own renderings and write it (``goal_parser.json`` and
    ``goal_parser.npz``).
    Prints one JSON line: where it went, how long it took and, with ``--heldout``, its held-out scores."""
    from agentic_ray.parser.evaluation import evaluate
    from agentic_ray.parser.train import ParserTrainConfig, domain_renderings, train_and_save

    d = registered_domain(domain)
    try:
        rend = domain_renderings(d)
    except LookupError as e:
        raise UserError(str(e)) from e
    folder = out or Path(d.data_dir)
    p = train_and_save(d, folder, ParserTrainConfig(per_family=per_family, seed=seed))
    line: dict[str, object] = {
        "domain": d.name,
        "out": str(folder),
        **{k: p.info[k] for k in ("examples", "train_s")},
        "min_confidence": p.min_confidence,
        "calibration": p.info.get("calibration"),
    }
    if heldout:
        from agentic_ray.parser.corpus import render_corpus

        r = evaluate(p, render_corpus(d, rend, heldout, "heldout", seed), rend)
        line.update(
            {k: round(v, 4) for k, v in r.__dict__.items() if k in ("family_acc", "slot_f1", "dag_exact")}
        )
    typer.echo(json.dumps(line))


@parser_app.command("parse")
def parser_parse(
    text: Annotated[str, typer.Argument(help="The customer's latest message.")],
    domain: Annotated[str, typer.Option(help="Registered domain.")],
    history: Annotated[
        list[str] | None, typer.Option(help="An earlier customer turn (repeat, oldest first).")
    ] = None,
    model: Annotated[
        Path | None, typer.Option(help="A parser folder (default: the domain's shipped one).")
    ] = None,
) -> None:
    """Parse one message and print the parsed request as JSON (goal DAG, facts, entities, spans, clarify)."""
    from agentic_ray.parser.goal_parser import load_parser

    d = registered_domain(domain)
    try:
        p = load_parser(d.name, str(model) if model else None)
    except FileNotFoundError as e:
        raise UserError(str(e)) from e
    typer.echo(json.dumps(p.parse(text, history or []).to_dict(), indent=1))

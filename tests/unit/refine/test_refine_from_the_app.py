"""The refiner reads what the real Serve app wrote: agent-mode sessions driven over HTTP (the service on an
in-process untrained policy, no Ray) and feedback posted to ``/v1/feedback``."""

from __future__ import annotations

from agentic_ray.refine import RefineConfig, refine
from agentic_ray.refine.served_episodes import read_served_episodes
from tests.helpers.serving import AUTH, TOKEN, env_config, make_service, validation_env
from tests.unit.refine.conftest import make_run_dir


def test_episodes_served_over_http_are_read_rescored_and_consumed(tmp_path, monkeypatch) -> None:
    from agentic_ray.eval.policy_loading import MODULE_SUBDIR
    from tests.helpers.serving import save_untrained_module

    monkeypatch.setenv("AGENTIC_RAY_SERVE_TOKEN", TOKEN)
    run = make_run_dir(tmp_path / "run")
    save_untrained_module(run / "checkpoints" / "reflection" / MODULE_SUBDIR)
    db = tmp_path / "serve" / "serve.sqlite"
    svc, c = make_service(
        {
            "stable": {"checkpoint": str(run / "checkpoints" / "reflection")},
            "env": env_config(),
            "feedback_db": str(db),
        }
    )
    sids, done = [], []
    try:
        for family in ("cancellation", "stock_inquiry"):
            sid = c.post("/v1/sessions", json={"domain": "ecommerce", "family": family}, headers=AUTH).json()[
                "session_id"
            ]
            while True:
                step = c.post(f"/v1/sessions/{sid}/step", json={}, headers=AUTH).json()
                if step["done"]:
                    break
            sids.append(sid)
            done.append(step)
        c.post(
            "/v1/feedback",
            json={"trace_id": sids[0], "outcome": "failure", "reason": "not_solved"},
            headers=AUTH,
        )
        fb = {"trace_id": f"{sids[1]}-0", "outcome": "failure", "reason": "wrong_steps"}
        assert c.post("/v1/feedback", json=fb, headers=AUTH).status_code == 200
    finally:
        svc.close()
    eps = read_served_episodes(db, validation_env())
    assert [e.session_id for e in eps] == sids  # feedback on the episode and on one of its steps
    for e, last in zip(eps, done, strict=True):
        assert e.record is not None and e.record.num_steps == last["t"] + 1
        assert e.record.steps[-1].result_code == last["result_code"]  # the replay is the episode the app ran
    rep = refine(db.parent, run, RefineConfig(max_alternatives=1, fix_memory=None), train=False)
    assert rep.episodes == 2 and rep.feedback == 2 and len(rep.rescored) == 2
    assert read_served_episodes(db, validation_env()) == []  # consumed in the app's store

from __future__ import annotations

from agentic_ray.eval.traces import append_traces, find_trace, format_trace

TRACE = {
    "trace_id": "ep-1",
    "episode_id": "e1",
    "task_family": "quality_refund",
    "stage": "rl",
    "iteration": 3,
    "completed": False,
    "reward_layers": {"l1_execution": -1.0, "l3_risk": -0.5},
    "steps": [
        {
            "t": 0,
            "skill": "refund.trigger",
            "args": {"order_id": "O-1", "amount": 12.5},
            "result_code": "PRECONDITION_FAILED",
            "latency_ms": 0.2,
            "step_trace_id": "abc123",
            "top_skills": [["refund.trigger", 0.61], ["inventory.check", 0.3]],
            "pointer": {"order_id": [["O-1", 0.9]]},
            "members": {"item_ids": [["P-1", 0.8], ["P-2", 0.1]]},
            "numeric": {
                "amount": {"mean": 0.2, "sigma": 0.5, "copy": [["O-1.total", 0.7], ["(free value)", 0.3]]}
            },
            "mask_reasons": {"order.update_address": ["hard: user not verified"]},
            "attention": {"user__uses__tool": [[0, 3, 0.7], [0, 1, 0.2]]},
            "gates": {"reflection": 0.4},
            "reflection": {
                "root_cause": "missing_prerequisite",
                "hypothesis": "refund needs a stock check",
                "minimal_experiment": "call inventory.check on the order's sku",
            },
        },
    ],
}


def test_find_by_episode_or_step_trace_id_and_format(tmp_path):
    append_traces(tmp_path, [TRACE])
    assert find_trace(tmp_path, "ep-1") == TRACE
    assert find_trace(tmp_path, "abc123") == TRACE
    assert find_trace(tmp_path, "nope") is None
    out = format_trace(TRACE)
    assert "refund.trigger(order_id=O-1, amount=12.50)  →  PRECONDITION_FAILED" in out
    assert "policy: refund.trigger 0.61, inventory.check 0.30" in out
    assert "masked: order.update_address (hard: user not verified)" in out
    assert "attention user__uses__tool: 0->3 0.70" in out
    assert "members item_ids: P-1 0.80, P-2 0.10" in out
    assert "numeric amount: mean +0.200 sigma 0.500; copy O-1.total 0.70, (free value) 0.30" in out
    assert "root cause missing_prerequisite" in out and "l3_risk -0.500" in out

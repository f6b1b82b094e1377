"""A damaged checkpoint is a CheckpointError naming the checkpoint and the file, never a pickle traceback; and
``agentic-ray eval`` / ``train --resume`` refuse it with exit code 2 before anything starts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentic_ray.eval.policy_loading import (
    MODULE_SUBDIR,
    CheckpointError,
    load_policy_module,
    verify_checkpoint,
)
from agentic_ray.settings import load_settings
from tests.helpers.cli import invoke

TINY = Path(__file__).resolve().parents[3] / "configs" / "tiny.yaml"


@pytest.fixture(scope="module")
def module_ckpt(tmp_path_factory) -> Path:
    from agentic_ray.algorithms.build import module_spec

    d = tmp_path_factory.mktemp("ckpt") / "module"
    module_spec(load_settings(TINY)).build().save_to_path(str(d))
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_a_sound_checkpoint_loads(module_ckpt):
    assert verify_checkpoint(module_ckpt, module_only=True) == module_ckpt
    assert load_policy_module(module_ckpt) is not None


def test_truncated_module_state_names_the_file(module_ckpt, tmp_path):
    d = _copy(module_ckpt, tmp_path / "m")
    state = d / "module_state.pkl"
    state.write_bytes(state.read_bytes()[:1000])  # a full disk mid-save
    with pytest.raises(
        CheckpointError, match=r"is corrupted: module_state\.pkl cannot be read \((EOFError|Unpickling)"
    ):
        load_policy_module(d)


def test_missing_or_garbled_files_are_named(module_ckpt, tmp_path):
    d = _copy(module_ckpt, tmp_path / "m")
    (d / "class_and_ctor_args.pkl").unlink()
    with pytest.raises(CheckpointError, match=r"incomplete: missing class_and_ctor_args\.pkl"):
        load_policy_module(d)
    d = _copy(module_ckpt, tmp_path / "m2")
    (d / "metadata.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"metadata\.json cannot be read \(JSONDecodeError"):
        load_policy_module(d)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_policy_module(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint files"):
        verify_checkpoint(tmp_path / "empty")


def _run_dir(tmp_path: Path, module_ckpt: Path, damage: bool = True) -> tuple[Path, Path]:
    """A run directory as the pipeline leaves it, whose latest checkpoint then gets damaged (if ``damage``)."""
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "latest"
    shutil.copytree(module_ckpt, ckpt / MODULE_SUBDIR)
    (ckpt / "metadata.json").write_text(json.dumps({"class_and_ctor_args_file": "class_and_ctor_args.pkl"}))
    # No minimum of CU pairs: an untrained module may need hundreds of validation tasks to give tiny's 10 (one
    # untrained predicted-diagnosis module took 221 s here); the CU pass still runs on the asked tasks.
    (run / "settings.json").write_text(load_settings(TINY, {"eval.cu_min_pairs": 0}).model_dump_json())
    (run / "state.json").write_text(json.dumps({"stage": "rl", "iteration": 1, "checkpoint": str(ckpt)}))
    if damage:
        (ckpt / MODULE_SUBDIR / "module_state.pkl").write_bytes(b"\x80\x05garbage")
    return run, ckpt


def test_train_resume_and_eval_refuse_a_corrupted_checkpoint(module_ckpt, tmp_path):
    run, _ = _run_dir(tmp_path, module_ckpt)
    r = invoke(["train", "--resume", str(run)])
    assert r.exit_code == 2, r.output
    assert "cannot resume" in r.output and "module_state.pkl cannot be read" in r.output
    r = invoke(["eval", str(run), "--checkpoint", "latest"])
    assert r.exit_code == 2 and "module_state.pkl cannot be read" in r.output, r.output


def test_train_resume_refuses_damaged_run_files(module_ckpt, tmp_path):
    run, _ = _run_dir(tmp_path, module_ckpt)
    (run / "state.json").write_text("{")
    r = invoke(["train", "--resume", str(run)])
    assert r.exit_code == 2 and f"{run / 'state.json'}: cannot read the pipeline state" in r.output, r.output
    (run / "settings.json").write_text('{"algo": {"gamma": 7}}')
    r = invoke(["train", "--resume", str(run)])
    assert r.exit_code == 2 and "settings.json: field algo.gamma" in r.output, r.output
    r = invoke(["train", "--resume", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such run directory" in r.output


def test_run_pipeline_resume_verifies_the_checkpoint_before_building(module_ckpt, tmp_path, monkeypatch):
    """The Python entry point checks the checkpoint too (not only the CLI's preflight): nothing is built."""
    from agentic_ray.stages import pipeline

    run, _ = _run_dir(tmp_path, module_ckpt)

    def no_build(*_a, **_kw):
        raise AssertionError("the algorithm was built from a damaged checkpoint")

    monkeypatch.setattr(pipeline, "build_algo_config", no_build)
    with pytest.raises(CheckpointError, match=r"module_state\.pkl cannot be read"):
        pipeline.run_pipeline(load_settings(TINY), resume=run, progress=lambda _m: None)


def test_eval_takes_a_relative_run_path(module_ckpt, tmp_path, monkeypatch):
    """``agentic-ray eval runs/<name>`` as the README gives it (it used to fail: ArrowInvalid, empty URI scheme)."""
    _run_dir(tmp_path, module_ckpt, damage=False)
    monkeypatch.chdir(tmp_path)
    r = invoke(["eval", "run", "--checkpoint", "latest", "--tasks-per-family", "1", "--no-cu"])
    assert r.exit_code == 0, r.stdout + r.stderr
    assert f"checkpoint: {tmp_path / 'run' / 'checkpoints' / 'latest'}" in r.stdout
    assert '"correction": null' in r.stdout or '"correction": {}' in r.stdout, r.stdout[-2000:]


@pytest.fixture(scope="module")
def oracle_ckpt(tmp_path_factory) -> Path:
    """A module trained (here: built) with the env's privileged root cause as its diagnosis input."""
    from agentic_ray.algorithms.build import module_spec

    d = tmp_path_factory.mktemp("oracle") / "module"
    s = load_settings(TINY, {"model.reflection_source": "oracle_env"})
    module_spec(s).build().save_to_path(str(d))
    return d


def test_an_oracle_checkpoint_is_refused_unless_allowed(module_ckpt, oracle_ckpt):
    from agentic_ray.eval.policy_loading import OracleCheckpointError, uses_oracle

    with pytest.raises(OracleCheckpointError, match=r"privileged root cause .*--allow-oracle"):
        load_policy_module(oracle_ckpt)
    assert uses_oracle(load_policy_module(oracle_ckpt, allow_oracle=True))
    assert not uses_oracle(load_policy_module(module_ckpt))


def test_serving_refuses_an_oracle_checkpoint(oracle_ckpt):
    from agentic_ray.eval.policy_loading import OracleCheckpointError
    from agentic_ray.serving.policy_runner import PolicyRunner

    with pytest.raises(OracleCheckpointError):
        PolicyRunner(oracle_ckpt)
    assert PolicyRunner(oracle_ckpt, allow_oracle=True).module is not None


def test_eval_refuses_an_oracle_checkpoint_unless_allowed(oracle_ckpt, tmp_path):
    run, _ = _run_dir(tmp_path, oracle_ckpt, damage=False)
    r = invoke(["eval", str(run), "--checkpoint", "latest", "--tasks-per-family", "1"])
    assert r.exit_code == 2 and "--allow-oracle" in r.output, r.output
    r = invoke(["eval", str(run), "--checkpoint", "latest", "--tasks-per-family", "1", "--allow-oracle"])
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "oracle: true" in r.stdout

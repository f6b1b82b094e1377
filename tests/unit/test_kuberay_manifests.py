"""The KubeRay manifests in ``configs/kuberay/`` name the project's real entry points, options, settings and files.

No Kubernetes cluster here, so the checks are static: each manifest is a ``ray.io/v1`` resource of the right kind;
each RayJob runs an ``agentic-ray`` subcommand the CLI has, with options that command takes, ``--set`` keys the
settings models have and config files the repository has, from the directory the image installs the repository
in; the RayService serves the application of ``serve_apps/policy.yaml`` through an import path that resolves to
the real application builder; and the images, Ray versions and volumes agree with each other, with the
Dockerfile and with the ``ray`` pin. (The manifests were also validated against KubeRay's CRD schemas once; see
docs/cluster.md.)

Imports stay light (YAML, AST, the Typer app): importing ``ray.serve`` or the settings models (torch) would cost
seconds.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBERAY = REPO / "configs" / "kuberay"
TRAIN, SWEEP, SERVICE = "rayjob-train.yaml", "rayjob-sweep.yaml", "rayservice.yaml"
APP_ROOT = "/home/ray/agentic-ray"
"""Where configs/kuberay/Dockerfile installs the repository (its WORKDIR); the jobs start there."""
SETTINGS_ROOTS = {
    "train": (REPO / "agentic_ray" / "settings.py", "ExperimentSettings"),
    "sweep": (REPO / "agentic_ray" / "sweeps" / "sweep_config.py", "SweepSettings"),
}
"""The settings model whose fields a subcommand's ``--set key=value`` names (resolved in that model's file)."""


def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((KUBERAY / name).read_text())
    assert isinstance(doc, dict), f"{name}: not one YAML mapping"
    return doc


def _cluster(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec" if doc["kind"] == "RayJob" else "rayClusterConfig"]


def _pods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    c = _cluster(doc)
    return [c["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in c["workerGroupSpecs"]]


def _mounts(pod: dict[str, Any]) -> list[str]:
    claims = {
        v["name"]
        for v in pod.get("volumes", [])
        if v.get("persistentVolumeClaim", {}).get("claimName") == "agentic-ray-runs"
    }
    return [
        m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", []) if m["name"] in claims
    ]


def _job_command(doc: dict[str, Any]) -> list[str]:
    """The entrypoint's ``agentic-ray ...`` words, after checking it starts in the image's repository copy."""
    first, sep, rest = " ".join(doc["spec"]["entrypoint"].split()).partition(" && ")
    assert sep and first == f"cd {APP_ROOT}", f"the entrypoint must start with `cd {APP_ROOT} && `: {first!r}"
    words = shlex.split(rest)
    assert words[0] == "agentic-ray", words
    return words[1:]


def _options(words: list[str]) -> dict[str, list[str]]:
    """``--option value`` pairs of a command's words (every option these commands take has a value)."""
    out: dict[str, list[str]] = {}
    for a, b in itertools.pairwise(words):
        if a.startswith("--"):
            out.setdefault(a, []).append(b)
    return out


def _classes(path: Path) -> dict[str, dict[str, str]]:
    """Class name -> {annotated field: annotation source} of one module."""
    tree = ast.parse(path.read_text())
    return {
        node.name: {
            stmt.target.id: ast.unparse(stmt.annotation)
            for stmt in node.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        }
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def _has_setting(path: Path, root: str, key: str) -> bool:
    """Whether ``key`` (dotted) names a field of ``root``, following nested models defined in the same file."""
    classes, cls = _classes(path), root
    parts = key.split(".")
    for i, part in enumerate(parts):
        fields = classes.get(cls, {})
        if part not in fields:
            return False
        if i < len(parts) - 1:
            nested = [n for n in re.findall(r"[A-Za-z_]\w*", fields[part]) if n in classes]
            if not nested:
                return False
            cls = nested[0]
    return True


@pytest.mark.parametrize(("name", "kind"), [(TRAIN, "RayJob"), (SWEEP, "RayJob"), (SERVICE, "RayService")])
def test_each_manifest_is_a_kuberay_v1_resource(name: str, kind: str) -> None:
    doc = _load(name)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == kind
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    assert _cluster(doc)["authOptions"] == {"mode": "token"}, "clusters use Ray token authentication"


@pytest.mark.parametrize(
    ("name", "sub", "config"),
    [(TRAIN, "train", "configs/quickstart.yaml"), (SWEEP, "sweep", "tune_sweeps/reward_weights_mobo.yaml")],
)
def test_each_job_runs_a_real_subcommand_with_real_options_and_files(
    name: str, sub: str, config: str
) -> None:
    import typer

    from agentic_ray.cli import app

    words = _job_command(_load(name))
    assert words[0] == sub
    command = typer.main.get_command(app).commands[sub]  # type: ignore[attr-defined]
    options = {o for p in command.params for o in p.opts}
    opts = _options(words[1:])
    assert not set(opts) - options, f"agentic-ray {sub} has no option(s) {set(opts) - options}"
    assert opts["--config"] == [config] and (REPO / config).is_file()
    path, root = SETTINGS_ROOTS[sub]
    for key in (v.split("=", 1)[0] for v in opts.get("--set", [])):
        assert _has_setting(path, root, key), f"--set {key}: no such field of {root}"


def test_the_run_directory_outlives_the_job_and_is_what_the_service_serves() -> None:
    train, sweep, service = _load(TRAIN), _load(SWEEP), _load(SERVICE)
    run_dir = _options(_job_command(train))["--run-dir"][0]
    sweep_dir = _options(_job_command(sweep))["--sweep-dir"][0]
    app = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
    head = _pods(train)[0]  # the driver (it writes the run) runs on the head
    assert any(run_dir.startswith(m + "/") for m in _mounts(head)), "the run must go to the volume"
    for pod in _pods(sweep):  # trials run on every node: the sweep directory must be on all of them
        assert any(sweep_dir.startswith(m + "/") for m in _mounts(pod))
    assert app["args"]["stable"]["checkpoint"] == run_dir, "the service serves the trained run"
    for pod in _pods(service):  # replicas run on any node: each reads the checkpoint and gets the token
        assert any(app["args"]["stable"]["checkpoint"].startswith(m + "/") for m in _mounts(pod))
        for c in pod["containers"]:
            assert app["args"]["auth"]["token_env"] in {e["name"] for e in c.get("env", [])}


def test_the_service_serves_the_policy_app_of_serve_apps() -> None:
    service = _load(SERVICE)
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    local = yaml.safe_load((REPO / "serve_apps" / "policy.yaml").read_text())
    (app,), (ref,) = config["applications"], local["applications"]

    module, _, attr = app["import_path"].partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not importable"
    tree = ast.parse(Path(spec.origin).read_text())
    assert attr in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, (
        f"{module} defines no {attr}"
    )
    deploy = ast.parse((REPO / "agentic_ray" / "serving" / "deploy.py").read_text())
    consts = {
        t.id: n.value.value
        for n in deploy.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    assert app["import_path"] == consts["APP_IMPORT_PATH"], "the path `agentic-ray serve` deploys"
    policy_app = ast.parse(
        (REPO / ref["import_path"].split(":")[0].replace(".", "/")).with_suffix(".py").read_text()
    )
    assert any(
        isinstance(n, ast.ImportFrom) and n.module == module and attr in {a.name for a in n.names}
        for n in policy_app.body
    ), "serve_apps' import path re-exports the same builder"

    paths = {"checkpoint", "feedback_db"}  # absolute on the cluster's volume, relative in serve_apps/

    def without_paths(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: without_paths(v) for k, v in x.items() if k not in paths}
        return x

    assert without_paths(app["args"]) == without_paths(ref["args"])
    assert all(
        Path(app["args"]["stable"][k] if k == "checkpoint" else app["args"][k]).is_absolute() for k in paths
    )
    for key in ("name", "route_prefix", "deployments"):
        assert app[key] == ref[key], key
    assert config.get("proxy_location") == local.get("proxy_location")


def test_images_and_ray_versions_agree_with_the_dockerfile_and_the_ray_pin() -> None:
    docs = [_load(n) for n in (TRAIN, SWEEP, SERVICE)]
    images = {c["image"] for d in docs for pod in _pods(d) for c in pod["containers"]}
    assert len(images) == 1, f"one image for every pod: {images}"
    versions = {_cluster(d)["rayVersion"] for d in docs}
    assert len(versions) == 1, versions
    (version,) = versions
    pin = re.search(r'"ray\[[^\]]*\]>=(\d+\.\d+),<', (REPO / "pyproject.toml").read_text())
    assert pin is not None and version.startswith(pin.group(1) + "."), (version, pin)
    dockerfile = (KUBERAY / "Dockerfile").read_text()
    assert f"ARG RAY_IMAGE=rayproject/ray:{version}-py311\n" in dockerfile
    assert f"\nWORKDIR {APP_ROOT}\n" in dockerfile
    assert re.search(r"pip install .*-e \.", dockerfile), (
        "installed editable: configs/ must sit beside the package"
    )

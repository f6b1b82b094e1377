"""Experiment YAML: malformed files, unknown fields and bad overrides are errors that name the file and field."""

from __future__ import annotations

import pytest

from agentic_ray.settings import SettingsError, load_settings


def _load(tmp_path, text: str, overrides: dict | None = None):
    p = tmp_path / "exp.yaml"
    p.write_text(text)
    return p, (lambda: load_settings(p, overrides))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\n  env: [\n", ["cannot read YAML", "line 2"]),
        ("name: x\nenv: {backend: python\n", ["cannot read YAML", "line"]),
        ("- name: x\n", ["top level must be a mapping", "list"]),
        ("just a string\n", ["top level must be a mapping", "str"]),
    ],
)
def test_malformed_yaml_names_the_file_and_where(tmp_path, text, expected):
    p, load = _load(tmp_path, text)
    with pytest.raises(SettingsError) as ei:
        load()
    msg = str(ei.value)
    assert str(p) in msg and all(e in msg for e in expected), msg


def test_unknown_field_names_file_field_and_the_known_fields(tmp_path):
    p, load = _load(
        tmp_path, "name: x\nenv:\n  backend: python\n  colour: red\nalgo:\n  lr_schedule: cosine\n"
    )
    with pytest.raises(SettingsError) as ei:
        load()
    lines = str(ei.value).splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{p}: field env.colour: unknown field") and "backend" in lines[0]
    assert lines[1].startswith(f"{p}: field algo.lr_schedule: unknown field") and "minibatch_size" in lines[1]


def test_wrong_value_and_bad_override_name_the_field(tmp_path):
    _, load = _load(tmp_path, "name: x\nalgo:\n  gamma: 1.5\n")
    with pytest.raises(SettingsError, match=r"field algo\.gamma: Input should be less than or equal to 1"):
        load()
    _, load = _load(tmp_path, "name: x\n", {"name.sub": 1})
    with pytest.raises(SettingsError, match=r"--set name\.sub: name is not a section"):
        load()
    _, load = _load(tmp_path, "", {"algo.lr": 0.01})  # an empty file is all defaults
    assert load().algo.lr == 0.01

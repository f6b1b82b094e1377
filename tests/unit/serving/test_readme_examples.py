"""The ``curl`` examples of the README and the docs site, sent as written to the service's HTTP app (no Ray): every
one is answered 200, so the documented bodies stay valid as the schemas change."""

from __future__ import annotations

import json
import re

from tests.helpers.serving import AUTH, REPO
from tests.unit.serving.test_service_app import make

CURL = re.compile(r"curl -s\S* http://127\.0\.0\.1:8000(?P<path>/\S+) .*?-d '(?P<body>.*?)'", re.S)


def _examples() -> list[tuple[str, dict]]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    return [(m["path"], json.loads(m["body"])) for m in CURL.finditer(text.replace("\\\n", " "))]


def test_readme_curl_examples_are_answered(settings_dict):
    examples = _examples()
    assert {p for p, _ in examples} == {"/v1/act", "/v1/episodes"}
    svc, c = make(settings_dict)
    try:
        for path, body in examples:
            r = c.post(path, json=body, headers=AUTH)
            assert r.status_code == 200, (path, r.text)
            if path == "/v1/act":
                d = r.json()
                assert d["skill"] and d["trace_id"] and d["alternatives"]
            else:
                steps = [json.loads(b.split("\n")[1][6:]) for b in r.text.strip().split("\n\n")[1:]]
                assert steps and steps[-1]["done"]
    finally:
        svc.close()

"""promptfoo results of shapes its types do not give (a field of another type, rows that are not
objects), in each of the three forms evalgate reads: each is read, with the odd field taken as
absent, or refused in one line naming the file (exit 2), never a traceback, never exit 1 (which
says the gate failed)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.errors import RunFileError
from evalgate.foreign import read_foreign

GOOD = {"success": True, "vars": {"q": "a"}, "provider": {"id": "p"}, "prompt": {"label": "L"}}

# One result's field replaced by a value of another shape.
ODD_FIELDS: dict[str, dict[str, Any]] = {
    "prompt a string": {"prompt": "hello"},
    "prompt a list": {"prompt": ["x"]},
    "prompt label an int": {"prompt": {"label": 7}},
    "testCase a string": {"testCase": "tc"},
    "testCase.assert an int": {"testCase": {"assert": 5}},
    "testCase.assert a string": {"testCase": {"assert": "abc"}},
    "testCase.assert value an object": {
        "testCase": {"assert": [{"type": "equals", "value": {"a": 1}}]}
    },
    "testCase.metadata.category a list": {"testCase": {"metadata": {"category": [1]}}},
    "vars a list": {"vars": [1, 2]},
    "vars a string": {"vars": "abc"},
    "response a string": {"response": "out"},
    "response a list": {"response": [1]},
    "gradingResult a string": {"gradingResult": "g"},
    "__repeatIndex a list": {"vars": {"q": "a", "__repeatIndex": [1]}},
    "__repeatIndex an object": {"vars": {"q": "a", "__repeatIndex": {}}},
    "provider a list": {"provider": [1]},
    "provider id an object": {"provider": {"id": {"x": 1}}},
    "error an object": {"success": False, "failureReason": 2, "error": {"a": 1}},
}
ODD_CONFIGS: dict[str, Any] = {
    "config a string": "x",
    "defaultTest.options a string": {"defaultTest": {"options": "x"}},
    "defaultTest.options a list": {"defaultTest": {"options": [1]}},
    "description an object": {"description": {"a": 1}},
}


def _forms(rows: list[Any], config: Any) -> dict[str, Any]:
    """The same results as ``promptfoo eval -o`` writes them and as its share bodies carry them."""
    return {
        "output": {"evalId": "e", "results": {"version": 3, "results": rows}, "config": config},
        "share v3": {
            "data": {"version": 3, "results": {"version": 2, "results": rows}, "config": config}
        },
        "share v4": {
            "id": "e",
            "createdAt": 1,
            "config": config if isinstance(config, dict) else {},
            "results": rows,
            "prompts": [],
        },
    }


CASES = (
    [
        (f"{form}: {what}", body)
        for what, change in ODD_FIELDS.items()
        for form, body in _forms([GOOD | change], {}).items()
    ]
    + [
        (f"{form}: {what}", body)
        for what, config in ODD_CONFIGS.items()
        for form, body in _forms([GOOD], config).items()
    ]
    + [
        (f"{form}: rows that are not objects", body)
        for form, body in _forms([1, "x", None, [1]], {}).items()
    ]
)


@pytest.mark.parametrize(("what", "body"), CASES, ids=[c[0] for c in CASES])
def test_an_odd_shape_is_read_or_refused_in_one_line(
    what: str, body: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    try:
        run = read_foreign(path).run()
    except RunFileError as exc:
        assert str(path) in str(exc)
    else:
        assert len(run.cases) == 1
    monkeypatch.chdir(tmp_path)  # no evalgate.yml: the gate's defaults
    out, err = io.StringIO(), io.StringIO()
    code = main(["gate", "--baseline", str(path), "--candidate", str(path)], out=out, err=err)
    assert code in (0, 2), err.getvalue()
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert len(err.getvalue().splitlines()) == 1 and str(path) in err.getvalue()

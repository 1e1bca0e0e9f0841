"""JUnit XML (``pytest --junitxml``, which DeepEval and pytest-based eval suites write).

A ``<testcase classname name>`` is a case, told by its class and name (a parametrised test's
name carries its parameters); the same case again, in the file or in ``<rerun*>`` elements
(pytest-rerunfailures), is a repeat. A ``<failure>`` fails it, an ``<error>`` is an error, a
``<skipped>`` one is counted and left out (it ran nothing). The model and prompt, which JUnit
has no place for, are read from ``<property name="model" value=...>`` and ``prompt`` (pytest's
``record_property`` or ``record_testsuite_property``), else unknown. A document with a DOCTYPE
is refused (no entity expansion).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from evalgate.errors import RunFileError
from evalgate.foreign.build import ForeignCase, ForeignRun, digest, errored, passed

_RERUNS = ("rerunFailure", "rerunError", "flakyFailure", "flakyError")


def looks_like(data: bytes) -> bool:
    head = data[:2048].lstrip()
    return head.startswith(b"<") and (b"<testsuite" in head or b"<testcase" in head)


def _properties(element: ET.Element) -> dict[str, str]:
    found: dict[str, str] = {}
    for prop in element.iter("property"):
        name, value = prop.get("name"), prop.get("value")
        if name and value is not None:
            found.setdefault(name, value)
    return found


def read(path: Path, data: bytes) -> ForeignRun:
    if b"<!DOCTYPE" in data[:4096].upper() or b"<!ENTITY" in data.upper():
        raise RunFileError(
            "a JUnit XML file with a DOCTYPE or entities",
            where=str(path),
            fix="pass the file pytest --junitxml wrote (it has neither)",
        )
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise RunFileError(
            f"not complete JUnit XML ({exc}): the file is truncated or not XML",
            where=str(path),
            fix="pass the whole file `pytest --junitxml` wrote",
        ) from None
    if root.tag not in ("testsuites", "testsuite"):
        raise RunFileError(
            f"not JUnit XML (the root is <{root.tag}>)",
            where=str(path),
            fix="pass the file `pytest --junitxml FILE.xml` wrote",
        )
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    props = _properties(root)
    name = suites[0].get("name") if suites else None
    run = ForeignRun(
        format="junit",
        path=path,
        suite=str(name or "junit"),
        model=props.get("model", "unknown"),
        model_settings={k: v for k, v in props.items() if k.startswith("model_")},
        prompt_name=props.get("prompt_name", "prompt"),
        prompt_text=props.get("prompt", props.get("prompt_sha256")),
        scorer={"kind": "junit", "scorer": props.get("scorer")},
    )
    for case in root.iter("testcase"):
        ident = f"{case.get('classname') or ''}::{case.get('name') or ''}"
        if ident == "::":
            run.drop("test cases without a name")
            continue
        if case.find("skipped") is not None:
            run.drop("skipped test cases", ident)
            continue
        own = _properties(case)
        found = ForeignCase(
            id=ident,
            input={k: v for k, v in own.items() if k not in ("model", "prompt")},
            expected=None,
            hash=digest({"id": ident, "file": case.get("file")}),
        )
        for rerun in (child for child in case if child.tag in _RERUNS):
            message = rerun.get("message") or rerun.tag
            if rerun.tag.endswith("Error"):
                run.add(found, errored(message))
            else:
                run.add(found, passed(False, reason=message[:500]))
        run.add(found, _outcome(case))
    return run


def _outcome(case: ET.Element) -> Any:
    error = case.find("error")
    if error is not None:
        return errored(error.get("message") or "error")
    failure = case.find("failure")
    if failure is not None:
        return passed(False, reason=(failure.get("message") or "failed")[:500])
    return passed(True)

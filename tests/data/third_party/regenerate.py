"""Write the corpus's expected results: ``python tests/data/third_party/regenerate.py``.

With ``--inspect`` (run by a Python that has inspect-ai, e.g. scripts/harness-setup's venv) it
writes what Inspect's own loader makes of each Inspect file (expected/ID.inspect.json). Without
it, it fills in each file's sha256 in MANIFEST.json and writes what evalgate makes of it
(expected/ID.json), except for a file with a ``known_fault``, whose expected result is written
by hand. Read the diff before committing it: the test checks evalgate against these
files, and checks them against Inspect's samples and OpenAI evals' documented format.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "MANIFEST.json"


def corpus_file(entry: dict[str, Any]) -> Path:
    return HERE / entry["package"] / (entry.get("file") or entry["path"])


def inspect_samples(entry: dict[str, Any]) -> list[dict[str, Any]]:
    from inspect_ai.dataset import FieldSpec, json_dataset

    fields = entry.get("fields") or {}
    dataset = json_dataset(str(corpus_file(entry)), FieldSpec(**fields) if fields else None)
    out = []
    for sample in dataset:
        given = sample.input
        messages = (
            given
            if isinstance(given, str)
            else [
                {
                    "role": m.role,
                    "content": m.content
                    if isinstance(m.content, str)
                    else [c.model_dump(exclude_none=True) for c in m.content],
                }
                for m in given
            ]
        )
        target = sample.target
        out.append(
            {
                "id": sample.id,
                "input": messages,
                "target": target if isinstance(target, list) else [target],
                "choices": sample.choices,
            }
        )
    return out


def main() -> None:
    manifest = json.loads(MANIFEST.read_text())
    if "--inspect" in sys.argv:
        import inspect_ai

        for entry in manifest["files"]:
            if entry["format"] != "inspect" or entry.get("inspect_refuses"):
                continue
            result = {
                "made_with": f"inspect-ai {inspect_ai.__version__}: python "
                "tests/data/third_party/regenerate.py --inspect (json_dataset with the "
                "entry's fields as FieldSpec)",
                "samples": inspect_samples(entry),
            }
            path = HERE / "expected" / f"{entry['id']}.inspect.json"
            path.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
        return

    from evalgate.cases.importers import convert
    from evalgate.errors import UserError

    root = HERE.parents[2]
    for entry in manifest["files"]:
        path = corpus_file(entry)
        entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        for companion in entry.get("companions", []):
            data = (HERE / entry["package"] / companion["file"]).read_bytes()
            companion["sha256"] = hashlib.sha256(data).hexdigest()
        entry["license"] = manifest["packages"][entry["package"]]["license"]
        entry["expected"] = f"expected/{entry['id']}.json"
        if entry.get("known_fault"):
            continue  # its expected result is written by hand: evalgate does not give it yet
        try:
            conversion = convert(entry["format"], path, rename=entry.get("fields") or None)
        except UserError as error:
            result: dict[str, Any] = {"refused": str(error).replace(f"{root}/", "")}
        else:
            result = {
                "scorer": conversion.plan.config,
                "cases": [record for _, record in conversion.records],
                "unscored": [
                    {"id": u.id, "where": u.where.replace(f"{root}/", ""), "reason": u.reason}
                    for u in conversion.unscored_list
                ],
                "unmapped": {n.what: n.count for n in conversion.notes.unmapped.values()},
            }
        previous = HERE / entry["expected"]
        if previous.is_file():
            # A note on how the result was checked by hand is kept.
            note = json.loads(previous.read_text()).get("written_by_hand")
            result = {"written_by_hand": note, **result} if note else result
        (HERE / entry["expected"]).write_text(
            json.dumps(result, ensure_ascii=False, indent=1) + "\n"
        )
    MANIFEST.write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")


if __name__ == "__main__":
    main()

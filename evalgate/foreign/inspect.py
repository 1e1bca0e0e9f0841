"""Inspect AI's logs: a ``.eval`` archive or a ``.json`` log, as inspect_ai.log writes them.

An ``EvalLog`` has ``version``, ``status`` (started, success, cancelled, error), ``eval`` (the
task, the model, its generate config), ``plan`` (the solvers), ``results`` (the scorers) and
``samples``, each with ``id``, ``epoch``, ``input``, ``target`` and ``scores`` (by scorer name:
``value`` and ``answer``). A ``.eval`` archive is a zip of ``header.json`` (the log without its
samples, written when the run ends) and ``samples/{id}_epoch_{n}.json``: an archive without a
header is a run that never finished, and is refused.

A case is a sample id; its epochs are its repeats. A score is the first scorer's value as
Inspect's value_to_float reads it (C 1, I 0, P 0.5, N 0, yes / true 1, no / false 0, numbers as
they are) and a pass is a value of 0.5 or more. A sample with an error is an error.
"""

from __future__ import annotations

import io
import json
import sys
import zlib
from pathlib import Path
from typing import Any

# inspect_ai 0.3.2xx compresses its .eval archives with zstd: Python's zipfile reads them from
# 3.14 on, and before it the backport of 3.14's zipfile (backports.zstd) does.
if sys.version_info >= (3, 14):
    import zipfile
else:
    from backports.zstd import zipfile

from evalgate.errors import RunFileError
from evalgate.foreign.build import ForeignCase, ForeignRun, digest, errored, load_json
from evalgate.runs.schema import MAX_RUN_BYTES, Outcome

VERSIONS = (1, 2)
_WORDS = {"c": 1.0, "i": 0.0, "p": 0.5, "n": 0.0, "yes": 1.0, "no": 0.0, "true": 1.0}
_WORDS["false"] = 0.0
# The largest member of an archive evalgate reads (a sample with its whole transcript).
_MEMBER_LIMIT = 64 * 1024 * 1024
# What an archive may unpack to in all (a few kilobytes of zstd can stand for gigabytes): the
# bound on any file evalgate reads.
_UNPACKED_LIMIT = MAX_RUN_BYTES
# The most members an archive may list (one a sample and epoch, and a few more): its listing
# is read whole when it is opened, at about a kilobyte a member.
_MEMBERS_LIMIT = 200_000
_CENTRAL = b"PK\x01\x02"  # the signature of a central-directory record
# What is kept of each sample as it is read (its transcript, often most of it, is not; its
# input only as a digest and the first characters a report shows).
_KEPT = ("id", "epoch", "target", "error", "scores")
_INPUT_KEPT = 4_000


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("eval"), dict) and "status" in data


def value_to_float(value: Any) -> float | None:
    """A score's value as Inspect's default value_to_float maps it (None: not a scalar)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer past any float: no share of right
            return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _WORDS:
            return _WORDS[text]
        try:
            return float(text)
        except ValueError:
            return None
    return None


def _slim(sample: Any) -> Any:
    """What the reader uses of a sample, taken as it is read: its identity's digest (input,
    target, choices), the start of its input, the scores and the completion; the transcript
    (messages, events) and the rest of a long input are not kept."""
    if not isinstance(sample, dict):
        return sample
    kept = {k: sample[k] for k in _KEPT if k in sample}
    kept["identity"] = digest(
        {
            "input": sample.get("input"),
            "target": sample.get("target"),
            "choices": sample.get("choices"),
        }
    )
    kept["input"] = _text(sample.get("input"))[:_INPUT_KEPT]
    output = sample.get("output")
    if isinstance(output, dict) and "completion" in output:
        kept["output"] = {"completion": output["completion"]}
    return kept


def _listed(data: bytes) -> int:
    """At least how many members opening the archive would list: zipfile builds an entry for
    each central-directory record, each of which starts with its signature, so the
    signatures in the file bound it (the end record's own count is the file's word, which
    zipfile never checks)."""
    return data.count(_CENTRAL)


def _archive(path: Path, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    listed = _listed(data)
    if listed > _MEMBERS_LIMIT:
        raise RunFileError(
            f"the .eval archive lists {listed:,} members or more; evalgate reads at most "
            f"{_MEMBERS_LIMIT:,} (one a sample and epoch)",
            where=str(path),
            fix="pass the log Inspect wrote, or write it as JSON (--log-format json)",
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RunFileError(
            "not a complete .eval archive (the zip cannot be opened): the file is truncated",
            where=str(path),
            fix="pass the whole log Inspect wrote (download it again if it was cut)",
        ) from None
    with archive:
        names = archive.namelist()
        if "header.json" not in names:
            raise RunFileError(
                "an unfinished Inspect log (the archive has no header.json yet)",
                where=str(path),
                fix="let `inspect eval` finish (or `inspect log` recover it), then gate its log",
            )

        def member(name: str) -> Any:
            info = archive.getinfo(name)
            if info.file_size > _MEMBER_LIMIT:
                raise RunFileError(f"{name} is over 64 MiB", where=str(path))
            try:
                return json.loads(archive.read(name))
            except NotImplementedError as exc:
                # A compression method neither zipfile nor the zstd backport knows.
                raise RunFileError(
                    f"{name} in the .eval archive cannot be decompressed ({exc})"[:300],
                    where=str(path),
                    fix="write the log as JSON: inspect eval --log-format json, or "
                    "`inspect log convert --to json --output-dir DIR LOG`",
                ) from None
            except (
                zipfile.BadZipFile,
                OSError,
                ValueError,
                RuntimeError,  # an encrypted member
                RecursionError,  # JSON nested past what the parser takes
                zlib.error,  # a damaged deflate stream
            ) as exc:
                raise RunFileError(
                    f"{name} in the archive cannot be read ({exc})"[:300],
                    where=str(path),
                    fix="pass the whole log Inspect wrote",
                ) from None

        wanted = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
        # Declared sizes: zipfile stops each member at its own (a longer stream is an error).
        unpacked = sum(archive.getinfo(n).file_size for n in ("header.json", *wanted))
        if unpacked > _UNPACKED_LIMIT:
            raise RunFileError(
                f"the .eval archive unpacks to {unpacked:,} bytes; evalgate reads at most "
                f"{_UNPACKED_LIMIT:,}",
                where=str(path),
                fix="gate fewer samples a log, or pass the log Inspect wrote, unedited",
            )
        header = member("header.json")
        samples = [_slim(member(n)) for n in wanted]
    return header, samples


def read(path: Path, data: bytes) -> ForeignRun:
    if data[:4] == b"PK\x03\x04" or path.suffix.lower() == ".eval":
        header, samples = _archive(path, data)
    else:
        header = load_json(path, data, "an Inspect log")
        listed = header.get("samples") if isinstance(header, dict) else None
        samples = [_slim(s) for s in listed] if isinstance(listed, list) else []
    if not looks_like(header):
        raise RunFileError(
            "not an Inspect log (no eval and status)",
            where=str(path),
            fix="pass a log `inspect eval` wrote (.eval or --log-format json)",
        )
    version = header.get("version")
    if version not in VERSIONS:
        raise RunFileError(
            f"an Inspect log of version {version!r}: evalgate reads versions 1 and 2",
            where=str(path),
            fix="write it with inspect_ai 0.3 or later",
        )
    status = header.get("status")
    if status == "started":
        raise RunFileError(
            "an unfinished Inspect log (status started)",
            where=str(path),
            fix="let `inspect eval` finish, then gate its log",
        )
    spec = header["eval"]
    scores = (header.get("results") or {}).get("scores") or []
    first = scores[0] if scores and isinstance(scores[0], dict) else {}
    scorer_name = first.get("name")
    run = ForeignRun(
        format="inspect",
        path=path,
        suite=str(spec.get("task") or "inspect"),
        model=str(spec.get("model") or "unknown"),
        model_settings=spec.get("model_generate_config") or {},
        prompt_name=str(spec.get("task") or "task"),
        prompt_text=(header.get("plan") or {}).get("steps"),
        scorer={
            "kind": "inspect",
            "scorers": [
                {"name": s.get("name"), "scorer": s.get("scorer"), "params": s.get("params")}
                for s in scores
                if isinstance(s, dict)
            ],
        },
        # A cancelled or failed run holds only some samples: the gate must not pass on it.
        interrupted=status in ("cancelled", "error"),
    )
    for sample in sorted(
        (s for s in samples if isinstance(s, dict)),
        key=lambda s: (str(s.get("id")), s.get("epoch", 1)),
    ):
        if sample.get("id") is None:
            run.drop("samples without an id")
            continue
        case = ForeignCase(
            id=str(sample["id"]),
            input={"input": sample["input"]},
            expected=sample.get("target"),
            hash=sample["identity"],
        )
        outcome = _outcome(sample, scorer_name)
        if outcome is None:
            run.drop(f"samples without a {scorer_name or 'scorer'} score")
            continue
        run.add(case, outcome)
    return run


def _outcome(sample: dict[str, Any], scorer: Any) -> Outcome | None:
    answer = None
    output = sample.get("output")
    if isinstance(output, dict):
        answer = output.get("completion") if isinstance(output.get("completion"), str) else None
    if sample.get("error"):
        error = sample["error"]
        message = error.get("message") if isinstance(error, dict) else error
        return errored(str(message), answer)
    scores: dict[str, Any] = sample["scores"] if isinstance(sample.get("scores"), dict) else {}
    score = scores.get(scorer) if scorer in scores else next(iter(scores.values()), None)
    if not isinstance(score, dict):
        return None
    value = value_to_float(score.get("value"))
    if value is None or not 0.0 <= value <= 1.0:
        # Not a score the gate can read as a share of right (a NaN, an infinity, a scale of
        # its own): counted among the samples without a usable score, never guessed.
        return None
    given = score.get("answer")
    return Outcome(
        score=value,
        format_ok=True,
        answer=str(given) if given is not None else answer,
        reason=str(score["explanation"])[:500] if score.get("explanation") else None,
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [m.get("content") for m in value if isinstance(m, dict)]
        return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    return json.dumps(value)

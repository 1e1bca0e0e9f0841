"""A killed run keeps every call it paid for: outcomes are journaled as they arrive, a SIGKILL
leaves the journal, `run --resume JOURNAL` sends exactly the calls not made, and the journal is
gone once a run is whole. Through a real `evalgate` process, the anthropic SDK and the Messages
stand-in."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult, shop_suite, spec_of

from evalgate.backends.base import BackendContext
from evalgate.backends.fake import FakeBackend
from evalgate.config.models import ModelSettings
from evalgate.errors import RunFileError
from evalgate.running.execute import Progress
from evalgate.running.suite import run_suite
from evalgate.runs.journal import journal_dir, read_journal
from evalgate.runs.resume import unsent
from evalgate.runs.schema import find_run, iter_runs
from tests.support.messages_server import STAND_IN_MODEL, Knobs, MessagesServer

CASES = 40
FAKE = {"backend": "fake", "name": "fake-classifier", "options": {"rules_file": "fake-rules.yml"}}


def _sent(srv: MessagesServer) -> int:
    return srv.stats().by_path.get("/v1/messages", 0)


def _journals(state: Path) -> list[Path]:
    folder = journal_dir(state)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def test_a_killed_run_keeps_its_outcomes_and_resumes_with_the_rest(
    tmp_path: Path, srv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    loaded = shop_suite(tmp_path / "s", cases=CASES, model=STAND_IN_MODEL, concurrency=2)
    srv.knobs = Knobs(latency_s=0.05)
    env = {
        **{k: v for k, v in os.environ.items() if k != "CI"},
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": srv.url,
    }
    argv = [sys.executable, "-m", "evalgate", "run", "v2", "--config", str(loaded.path)]
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            found = _journals(loaded.state_dir)
            if found and len(found[0].read_bytes().splitlines()) > 1 + CASES + 10:
                break
            time.sleep(0.02)
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert list(iter_runs(loaded.state_dir)) == []  # no run file: the kill came first
    [path] = _journals(loaded.state_dir)
    paid = _sent(srv)
    run = read_journal(path)
    assert run.interrupted and run.incomplete and len(run.cases) == CASES
    kept = [o for c in run.cases for o in c.outcomes if o.error_kind != "interrupted"]
    # Every reply the stand-in sent before the kill is kept but those still in flight (at most
    # the concurrency) and the one whose line the kill may have cut.
    assert paid - 3 <= len(kept) <= paid
    assert all(o.score is not None and o.error is None for o in kept)
    assert len(unsent(run)) == CASES - len(kept)
    # Its report says how to resume it by name, and the name finds the journal.
    code, out, err = cli("report", str(path), "--config", str(loaded.path))
    assert f"`evalgate run v2 --resume {run.name}` sends only those" in out, out + err
    assert find_run(run.name, loaded.state_dir).name == run.name

    # A later run names the journal and how to resume it; a gate reads it as incomplete.
    keys = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=keys)
    assert code == 0, err
    assert (
        f"a run of suite shop (prompt v2) was cut off with {len(kept)} of {CASES} calls made; "
        f"they are kept in {path}: `evalgate run v2 --resume {path}` sends the rest"
    ) in err
    [(baseline, _)] = list(iter_runs(loaded.state_dir))
    argv = ["gate", "--baseline", str(baseline), "--candidate", str(path)]
    code, out, err = cli(*argv, "--config", str(loaded.path), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["kind"] == "inconclusive"
    assert "interrupted" in out
    srv.reset()
    code, _, err = cli(
        "run",
        "v2",
        "--config",
        str(loaded.path),
        "--resume",
        run.name,  # as the report said
        env={"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url},
    )
    assert code == 0, err
    assert _sent(srv) == CASES - len(kept)  # exactly the calls not made, none resent
    assert not path.exists() and _journals(loaded.state_dir) == []
    [whole] = [r for p, r in iter_runs(loaded.state_dir) if p != baseline]
    assert whole.name == run.name  # the journal's run, whole
    assert not whole.incomplete and len(whole.scored()) == CASES


def test_the_journal_grows_while_the_run_is_sent_and_goes_once_it_is_whole(
    tmp_path: Path,
) -> None:
    loaded = shop_suite(tmp_path / "s", cases=12, model=FAKE, concurrency=1)
    spec = spec_of(loaded, "v2")
    backend = FakeBackend(
        ModelSettings(options={"rules_file": "fake-rules.yml"}),
        BackendContext(base_dir=loaded.root),
    )
    seen: list[int] = []

    def look(progress: Progress) -> None:
        [path] = _journals(loaded.state_dir)
        partial = read_journal(path)
        seen.append(sum(o.error_kind != "interrupted" for c in partial.cases for o in c.outcomes))

    run = run_suite(
        spec, backend, loaded.root, on_progress=look, journal_dir=journal_dir(loaded.state_dir)
    )
    assert seen == list(range(1, 13))  # each outcome on disk before the next call is made
    assert _journals(loaded.state_dir) == []
    assert not run.interrupted and len(run.scored()) == 12


def test_a_journal_cut_mid_line_drops_that_line_alone(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    loaded = shop_suite(tmp_path / "s", cases=6, model=FAKE)
    assert cli("run", "v2", "--config", str(loaded.path))[0] == 0
    [(_, whole)] = list(iter_runs(loaded.state_dir))
    # A journal written by hand in the journal's form: head, case lines, three outcomes, the
    # third cut short by the kill.
    from evalgate.runs.journal import Journal
    from evalgate.runs.resume import INTERRUPTED

    skeleton = whole.model_copy(
        update={"cases": [c.model_copy(update={"outcomes": [INTERRUPTED]}) for c in whole.cases]}
    )
    path = journal_dir(loaded.state_dir) / "cut.jsonl"
    journal = Journal(path, skeleton)
    for i in range(3):
        journal.write(i, 0, whole.cases[i].outcomes[0])
    journal.close()
    text = path.read_bytes()
    path.write_bytes(text[:-25])  # the last outcome's line, cut
    run = read_journal(path)
    assert [c.outcomes[0].error_kind for c in run.cases] == [None, None] + ["interrupted"] * 4
    assert run.cases[1].outcomes[0] == whole.cases[1].outcomes[0]
    # A broken line that is not the last is damage, not a kill: refused, naming the line.
    lines = text.splitlines(keepends=True)
    lines[-2] = b'[1,0,{"score": \n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(RunFileError, match=f"line {len(lines) - 1} is not an outcome"):
        read_journal(path)
    assert json.loads(lines[0])["journal"] == 1


def test_a_folder_that_cannot_hold_a_journal_costs_the_journal_not_the_run(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    loaded = shop_suite(tmp_path / "s", cases=5, model=FAKE)
    # A file where the journal folder would be: it cannot be made (as in a read-only checkout).
    journal_dir(loaded.state_dir).parent.mkdir(parents=True, exist_ok=True)
    journal_dir(loaded.state_dir).write_text("not a folder", encoding="utf-8")
    code, _, err = cli("run", "v2", "--config", str(loaded.path))
    assert code == 0, err
    assert "the run is not journaled (" in err
    assert len(list(iter_runs(loaded.state_dir))) == 1
    # --no-save writes nothing into the state folder, a journal neither.
    other = shop_suite(tmp_path / "t", cases=5, model=FAKE)
    code, _, err = cli("run", "v2", "--config", str(other.path), "--no-save")
    assert code == 0, err
    assert not journal_dir(other.state_dir).exists()

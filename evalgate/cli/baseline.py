"""``evalgate baseline pull``: the newest baseline artefact of the default branch, downloaded."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options
from evalgate.defaults import BASELINE_ARTIFACT
from evalgate.errors import UserError


def cmd_baseline_pull(ctx: Context) -> int:
    """Fetch the default branch's baseline artefact, as the pull-request gate does."""
    from evalgate.publish import github as gh

    token = ctx.env.get("GITHUB_TOKEN") or ctx.env.get("GH_TOKEN")
    if not token:
        raise UserError(
            "baseline pull needs a token to read workflow artefacts",
            fix="set GITHUB_TOKEN (a token with actions: read on the repository)",
        )
    api = ctx.env.get("GITHUB_API_URL", "https://api.github.com")
    repo = gh.get_repository(gh.connect(token, api), ctx.args.repo)
    branch = ctx.args.branch or repo.default_branch
    ref = gh.find_baseline(repo, ctx.args.artifact, branch, prefer_sha=ctx.args.sha)
    if ref is None:
        raise UserError(
            f"no unexpired {ctx.args.artifact!r} artefact from a push, scheduled or manual run "
            f"on {branch}",
            fix="run the baseline job on the default branch (or wait for its weekly run)",
        )
    out = Path(ctx.args.out)
    folder = gh.download_artifact(ref, token, out)
    written: list[str] = []
    # An evalgate run file per suite (.json), or the results file another harness wrote
    # (promptfoo's .json, an Inspect .eval or .json log, JUnit .xml): where `evalgate gate
    # --baseline` finds it.
    kept = (".json", ".eval", ".xml")
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in kept):
        shutil.copy(path, out / path.name)
        written.append(str(out / path.name))
    if ctx.args.format == "json":
        document = {
            "head_sha": ref.head_sha,
            "created_at": ref.created_at.isoformat(),
            "run_url": ref.html_url,
            "files": written,
        }
        ctx.print(json.dumps(document, indent=2))
        return EXIT_OK
    ctx.print(f"baseline from {ref.head_sha[:12]} ({ref.created_at:%Y-%m-%d}, run {ref.html_url})")
    for name in written:
        ctx.print(f"  {name}")
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    baseline = sub.add_parser("baseline", help="baseline artefacts of the default branch")
    bsub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    pull = bsub.add_parser(
        "pull",
        parents=[common_options(TEXT_OR_JSON)],
        help="download the newest baseline artefact",
    )
    pull.add_argument("--repo", required=True, help="OWNER/NAME")
    pull.add_argument("--artifact", default=BASELINE_ARTIFACT, help="artefact name")
    pull.add_argument("--branch", help="default branch (default: the repository's)")
    pull.add_argument("--sha", help="prefer the baseline built at this commit (the merge base)")
    pull.add_argument("--out", default=".evalgate/baseline", help="folder to extract into")
    pull.set_defaults(func=cmd_baseline_pull)

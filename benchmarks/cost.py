"""Cost with and without prompt caching on the bike-shop suite (prints a table).

    python -m benchmarks.cost

Runs the bike-shop dev cases with the v3 prompt through the anthropic backend against the
Messages stand-in (which accounts for prompt caching as the API does), once with the system
prompt marked for caching and once without, and prices both with the package's price table.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from evalgate.analysis.pricing import Usage, cost
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext
from evalgate.backends.fake import load_rules
from evalgate.config.load import load_config
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from tests.support.messages_server import Knobs, MessagesServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"


def usage_of(cache_system: bool, folder: Path, url: str) -> tuple[Usage, int]:
    config = yaml.safe_load((EXAMPLE / "evalgate.yml").read_text(encoding="utf-8"))
    suite = config["suites"]["bike-shop"]
    suite["model"] = {
        "backend": "anthropic",
        "name": MODEL,
        "max_tokens": 64,
        "options": {"cache_system": cache_system},
    }
    (folder / "evalgate.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    loaded = load_config(folder / "evalgate.yml")
    name, suite_model = loaded.suite(None)
    spec = RunSpec(
        suite_name=name,
        suite=suite_model,
        prompt=load_prompt(loaded, suite_model, "v3"),
        cases=load_suite_cases(loaded, suite_model),
        concurrency=4,
    )
    env = {"ANTHROPIC_API_KEY": "benchmark-key", "ANTHROPIC_BASE_URL": url}
    backend = AnthropicBackend(suite_model.model, BackendContext(base_dir=loaded.root, env=env))
    try:
        run = run_suite(spec, backend, loaded.root)
    finally:
        backend.close()
    total = Usage()
    for case in run.cases:
        for o in case.outcomes:
            total = total + Usage(
                input_tokens=o.input_tokens,
                output_tokens=o.output_tokens,
                cache_write_tokens=o.cache_write_tokens,
                cache_read_tokens=o.cache_read_tokens,
            )
    return total, len(run.cases)


def main() -> int:
    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with tempfile.TemporaryDirectory() as tmp, MessagesServer(rules, Knobs()) as server:
        folder = Path(tmp) / "bike-shop"
        shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns(".evalgate"))
        rows = []
        for cached in (False, True):
            usage, n = usage_of(cached, folder, server.url)
            rows.append((cached, usage, cost(usage, MODEL) or 0.0, n))
    (_, plain, plain_cost, n), (_, cached, cached_cost, _) = rows
    print(f"Prompt caching on the bike-shop suite: {n} dev cases, prompt v3, {MODEL} prices")
    print(f"{'':<22}{'input':>9}{'cache write':>13}{'cache read':>12}{'output':>8}{'cost':>10}")
    for label, u, c in (
        ("no caching", plain, plain_cost),
        ("system prompt cached", cached, cached_cost),
    ):
        print(
            f"{label:<22}{u.input_tokens:>9,}{u.cache_write_tokens:>13,}"
            f"{u.cache_read_tokens:>12,}{u.output_tokens:>8,}{'$' + format(c, '.4f'):>10}"
        )
    print(f"cost ratio cached / uncached: {cached_cost / plain_cost:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

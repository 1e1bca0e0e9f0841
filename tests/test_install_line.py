"""The pip line a missing extra's message gives: the checkout's in a checkout, the
repository's at a tag otherwise (pip's direct_url.json, PEP 610, tells them apart)."""

from __future__ import annotations

import pytest

from evalgate import checkout_install_line, install_line, install_line_here


@pytest.mark.parametrize(
    ("direct_url", "line"),
    [
        (
            {"url": "file:///src/evalgate", "dir_info": {"editable": True}},
            'pip install -e ".[openai]"',
        ),
        ({"url": "file:///src/evalgate", "dir_info": {}}, 'pip install ".[openai]"'),
        (
            {
                "url": "https://github.com/evalgate/evalgate",
                "vcs_info": {"vcs": "git", "requested_revision": "v0", "commit_id": "a" * 40},
            },
            None,
        ),
        ({"url": "https://example.org/pr_evalgate-0.1.0.whl", "archive_info": {}}, None),
        (None, None),
    ],
)
def test_checkout_install_line(direct_url: dict[str, object] | None, line: str | None) -> None:
    assert checkout_install_line(direct_url, "openai") == line


def test_away_from_a_checkout_the_line_installs_from_the_repository() -> None:
    assert install_line("openai") == (
        'pip install "pr-evalgate[openai] @ git+https://github.com/evalgate/evalgate@v0"'
    )


def test_this_checkout_gets_the_checkout_line() -> None:
    # The test suite runs from an editable install of the checkout (pip install -e ".[dev]").
    assert install_line_here("openai") == 'in the checkout: pip install -e ".[openai]"'

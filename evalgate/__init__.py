"""evalgate: paired, noise-aware evaluation gates for LLM prompts."""

import json
from pathlib import Path

# The one place the version is written: pyproject.toml reads it from here (setuptools'
# dynamic ``attr``), so the installed metadata says the same. A literal, not
# importlib.metadata's lookup, which costs every command 20 ms of start-up.
__version__ = "0.1.0"

# The distribution's name on the package index is not the import package's: "evalgate" and
# several "evalgate-*" names there belong to unrelated projects. Install this one from its
# repository at a tag (or use the action's image); every install line is built from these.
DISTRIBUTION = "pr-evalgate"
SOURCE = "git+https://github.com/evalgate/evalgate"
RELEASE_TAG = "v0"


def install_line(extra: str | None = None) -> str:
    """The pip command that installs this project (with an optional extra)."""
    name = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
    return f'pip install "{name} @ {SOURCE}@{RELEASE_TAG}"'


def checkout_install_line(direct_url: dict[str, object] | None, extra: str) -> str | None:
    """The pip command that adds ``extra`` to an install made from a checkout (pip's
    direct_url.json of the install, PEP 610, names a local folder), or None for any other."""
    if direct_url is None:
        return None
    dir_info = direct_url.get("dir_info")
    if not isinstance(dir_info, dict):
        return None
    editable = "-e " if dir_info.get("editable") else ""
    return f'pip install {editable}".[{extra}]"'


def install_line_here(extra: str) -> str:
    """The pip command that adds ``extra`` to this install: from the checkout it was installed
    from (where the tag's line would replace the checkout's code), else from the repository."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        found = distribution(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed: a checkout
        return f'in the checkout: pip install -e ".[{extra}]"'
    text = found.read_text("direct_url.json")
    try:
        direct_url = json.loads(text) if text else None
    except ValueError:
        direct_url = None
    here = checkout_install_line(direct_url if isinstance(direct_url, dict) else None, extra)
    if here is None and text is None:
        # Metadata with no record of where it came from, beside a pyproject.toml: the
        # egg-info of a development install, in the checkout itself.
        root = Path(str(found.locate_file("")))
        if (root / "pyproject.toml").is_file() and (root / "evalgate").is_dir():
            here = f'pip install -e ".[{extra}]"'
    return f"in the checkout: {here}" if here else install_line(extra)

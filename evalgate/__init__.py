"""evalgate: paired, noise-aware evaluation gates for LLM prompts."""

from importlib.metadata import PackageNotFoundError, version

# The distribution's name on the package index is not the import package's: "evalgate" and
# several "evalgate-*" names there belong to unrelated projects. Install this one from its
# repository at a tag (or use the action's image); every install line is built from these.
DISTRIBUTION = "pr-evalgate"
SOURCE = "git+https://github.com/evalgate/evalgate"
RELEASE_TAG = "v0"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"


def install_line(extra: str | None = None) -> str:
    """The pip command that installs this project (with an optional extra)."""
    name = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
    return f'pip install "{name} @ {SOURCE}@{RELEASE_TAG}"'

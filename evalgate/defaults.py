"""The names and paths evalgate uses unless told otherwise, each in one place."""

CONFIG_FILE = "evalgate.yml"
# Where runs, the cache, the ledger and downloads live, under the config's folder.
STATE_DIR = ".evalgate"
WORKFLOW = ".github/workflows/evalgate.yml"
# The workflow artefact a default-branch push uploads, and the one a fork's pull request does.
BASELINE_ARTIFACT = "evalgate-baseline"
FORK_ARTIFACT = "evalgate-fork"
# The branch that keeps release records, the holdout ledger and the baseline history.
DATA_BRANCH = "evalgate-data"


def data_file(suite: str, name: str) -> str:
    """A suite's file on the data branch: ``releases.json``, ``holdout-ledger.jsonl``,
    ``baselines.jsonl``."""
    return f"evalgate/{suite}/{name}"


# The secret that opens the sealed holdout and keys holdout names.
HOLDOUT_KEY_VARIABLE = "EVALGATE_HOLDOUT_KEY"
# GitHub refuses a comment (or a check run's summary) body over this many characters.
COMMENT_LIMIT = 65_536

# The public key `evalgate holdout keygen` writes beside the config when no sealed holdout names one.
PLAINTEXT_PUBLIC_KEY = "holdout.pub"

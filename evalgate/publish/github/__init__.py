"""Everything evalgate asks of GitHub: the PR comment, baseline artefacts, checks, the data branch.

The only package that imports PyGithub. Functions receive an already-built client or repository
(``connect`` is what the composition root calls to build one) and turn every GitHub failure
into a ``GitHubError`` that names the permission or setting that fixes it (``client``).
Callers use it as ``from evalgate.publish import github as gh``: the names below are its API.
"""

from __future__ import annotations

from evalgate.publish.github.artifacts import (
    BASELINE_EVENTS,
    BaselineRef,
    download_artifact,
    find_baseline,
    find_run_artifact,
    load_baseline_run,
)
from evalgate.publish.github.checks import (
    ANNOTATIONS_PER_REQUEST,
    MAX_ANNOTATIONS,
    CheckConclusion,
    StatusState,
    create_check_run,
    publish_check,
    set_commit_status,
)
from evalgate.publish.github.client import (
    API_VERSION,
    CHECK_SUMMARY_MAX,
    COMMENT_MAX,
    NOT_ACCESSIBLE,
    PERM_ACTIONS_READ,
    PERM_CHECKS_WRITE,
    PERM_CONTENTS_READ,
    PERM_CONTENTS_WRITE,
    PERM_PR_READ,
    PERM_PR_WRITE,
    PERM_STATUSES_WRITE,
    RETRY_METHODS,
    RETRY_STATUSES,
    STATUS_DESCRIPTION_MAX,
    TRUNCATED,
    ArtifactExpiredError,
    GitHubError,
    connect,
    disconnect,
    get_repository,
    make_retry,
)
from evalgate.publish.github.comments import (
    LEDGER_COMMENTS,
    Marked,
    marked_bodies,
    upsert_comment,
)
from evalgate.publish.github.data_branch import (
    ContentsTree,
    read_data_file,
    write_data_file,
)
from evalgate.publish.github.pulls import (
    PullInfo,
    closed_unmerged_since,
    merge_base,
    merged_as,
    pull_request_info,
)
from evalgate.publish.github.release_checks import (
    ReleaseCheck,
    release_checks,
)

__all__ = [
    "ANNOTATIONS_PER_REQUEST",
    "API_VERSION",
    "BASELINE_EVENTS",
    "CHECK_SUMMARY_MAX",
    "COMMENT_MAX",
    "LEDGER_COMMENTS",
    "MAX_ANNOTATIONS",
    "NOT_ACCESSIBLE",
    "PERM_ACTIONS_READ",
    "PERM_CHECKS_WRITE",
    "PERM_CONTENTS_READ",
    "PERM_CONTENTS_WRITE",
    "PERM_PR_READ",
    "PERM_PR_WRITE",
    "PERM_STATUSES_WRITE",
    "RETRY_METHODS",
    "RETRY_STATUSES",
    "STATUS_DESCRIPTION_MAX",
    "TRUNCATED",
    "ArtifactExpiredError",
    "BaselineRef",
    "CheckConclusion",
    "ContentsTree",
    "GitHubError",
    "Marked",
    "PullInfo",
    "ReleaseCheck",
    "StatusState",
    "closed_unmerged_since",
    "connect",
    "create_check_run",
    "disconnect",
    "download_artifact",
    "find_baseline",
    "find_run_artifact",
    "get_repository",
    "load_baseline_run",
    "make_retry",
    "marked_bodies",
    "merge_base",
    "merged_as",
    "publish_check",
    "pull_request_info",
    "read_data_file",
    "release_checks",
    "set_commit_status",
    "upsert_comment",
    "write_data_file",
]

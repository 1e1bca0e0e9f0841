"""One exception tree. Every message says what went wrong, where, and how to fix it."""

from __future__ import annotations

from evalgate.redact import redact


class EvalgateError(Exception):
    """Base of every error evalgate raises on purpose."""

    exit_code = 2


class UserError(EvalgateError):
    """A mistake in the user's input: config, cases, arguments, files. Exit 2, no traceback."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        # Messages quote upstream answers (an API's, GitHub's, a command's): no secret in them.
        self.what = redact(what)
        self.where = None if where is None else redact(where)
        self.fix = None if fix is None else redact(fix)
        super().__init__(self.one_line())

    def one_line(self) -> str:
        head = f"{self.where}: {self.what}" if self.where else self.what
        return f"{head} ({self.fix})" if self.fix else head


class ConfigError(UserError):
    """evalgate.yml is missing or invalid."""


class CaseFileError(UserError):
    """A case file cannot be read or a case in it is invalid."""


class BackendError(UserError):
    """A backend cannot be built or refuses the run before it starts (missing key, bad model)."""


class MissingExtraError(BackendError):
    """An optional dependency is not installed."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs an optional dependency that is not installed",
            fix=f'pip install "evalgate[{extra}]"',
        )


class RunFileError(UserError):
    """A saved run cannot be found or read."""

"""One exception tree. Every message says what went wrong, where, and how to fix it."""

from __future__ import annotations

from evalgate import install_line


class EvalgateError(Exception):
    """Base of every error evalgate raises on purpose."""

    exit_code = 2


class UserError(EvalgateError):
    """A mistake in the user's input: config, cases, arguments, files. Exit 2, no traceback."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
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
            fix=install_line(extra),
        )


class RunFileError(UserError):
    """A saved run cannot be found or read."""

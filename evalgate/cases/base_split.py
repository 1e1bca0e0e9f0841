"""The split is decided on the default branch: a pull request's own files never choose its holdout.

Everything a pull request's head can change is untrusted, its evalgate.yml and case files too.
So in a pull request the split policy (salt, fraction, field mapping, the sealed store, the
``split`` values written on cases) is read from the pull request's base commit, and:

* a case that is holdout at the base stays holdout, whatever the head's files say: matched by
  its id in the same suite, by its record's hash, by its normalised input or a near-duplicate
  of it in any suite, or by its scenario group; it is never sent, scored or shown;
* every other case that exists at the base keeps its base split;
* a new case takes the split written on it, else its group's hashed side under the base's
  salt and fraction;
* what the head changes about the holdout (cases moved out of it, removed or edited, the
  policy, the sealed store other than by growing) is counted, and the job says so.

The base's files are read through a :class:`Tree` (git, or GitHub's contents API), copied into
a private folder and loaded there with the ordinary loaders. Nothing here is published: the
base's holdout cases stay in memory.
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from evalgate import files, globs
from evalgate.cases.read import Case, CaseSet, SplitName
from evalgate.cases.split import assign, group_key, hashed_side, input_text
from evalgate.cases.split import not_input as bookkeeping
from evalgate.cases.templating import compile_template, render_turn
from evalgate.config.load import LoadedConfig, load_config
from evalgate.config.models import SplitPolicy, Suite
from evalgate.errors import UserError
from evalgate.running.suite import read_suite_cases

# A base folder larger than this is not copied: the split cannot depend on that many files.
MAX_FILES = 5_000


class BaseUnavailable(UserError):
    """The base commit's split policy cannot be read: the job must not fall back to the head's."""


class Tree(Protocol):
    """A commit's files, read-only, by repository-relative POSIX path."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None when there is no such file."""

    def list(self, folder: str) -> list[tuple[str, bool]]:
        """(name, is_folder) of each entry of ``folder`` ("" is the top); [] when absent."""


def _glob(tree: Tree, pattern: str) -> list[str]:
    """Paths of ``tree`` matching ``pattern`` as the config's globs are expanded (evalgate.globs)."""
    return globs.walk(pattern, tree.list, MAX_FILES)


def _inside(path: str) -> bool:
    return not (path.startswith("/") or path == ".." or path.startswith("../"))


def materialize(tree: Tree, config: str, dest: Path) -> Path | None:
    """Copy the base's config, and every file its suites' cases come from, into ``dest``.

    Returns the copied config's path, or None when the base has no config there (a pull
    request that brings evalgate in: nothing is held out at the base yet).
    """
    data = tree.read(config)
    if data is None:
        return None
    written = 0

    def put(path: str, content: bytes) -> None:
        nonlocal written
        written += 1
        if written > MAX_FILES:
            raise BaseUnavailable(
                f"the base commit's suites read more than {MAX_FILES} files",
                fix="narrow the case globs in evalgate.yml",
            )
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    put(config, data)
    loaded = _load(dest / config)
    folder = posixpath.dirname(config)
    for suite in loaded.config.suites.values():
        patterns = list(suite.cases)
        if suite.sealed_holdout is not None:
            patterns += [suite.sealed_holdout.file, suite.sealed_holdout.changes]
        for pattern in patterns:
            path = posixpath.normpath(posixpath.join(folder, pattern))
            if not _inside(path):
                continue
            for match in _glob(tree, path):
                content = tree.read(match)
                if content is not None:
                    put(match, content)
        if suite.cases_format != "evalgate":
            from evalgate.cases.importers import referenced_files

            for case_file in loaded.expand(suite.cases, "case file"):
                for extra in referenced_files(suite.cases_format, case_file):
                    try:
                        relative = Path(extra).resolve().relative_to(dest.resolve()).as_posix()
                    except ValueError:
                        continue  # outside the repository: not the base's to provide
                    content = tree.read(relative)
                    if content is not None and not (dest / relative).exists():
                        put(relative, content)
    return dest / config


def _load(path: Path) -> LoadedConfig:
    try:
        return load_config(path)
    except UserError as exc:
        raise BaseUnavailable(
            f"the base commit's evalgate config cannot be read: {exc.what}",
            fix="fix evalgate.yml on the default branch first",
        ) from None


def _lines(path: Path) -> Counter[str]:
    if not path.is_file():
        return Counter()
    text = files.read_text(path, "the sealed holdout", BaseUnavailable)
    return Counter(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class BaseSuite:
    """One suite as the base commit defines it."""

    suite: Suite
    # Every case's split at the base, by id, and its record's hash.
    splits: dict[str, SplitName]
    hashes: dict[str, str]
    holdout: tuple[Case, ...]
    # Group keys of the base holdout (under the base policy).
    holdout_groups: frozenset[str]
    # The sealed store's lines (ciphertext) at the base.
    sealed: Counter[str] = field(default_factory=Counter)
    # The base's dev and regression cases (the holdout guard leaves out what they carry).
    public: tuple[Case, ...] = ()


@dataclass(frozen=True)
class BaseSplit:
    """The base commit's split: what is holdout there, and the policy for new cases."""

    suites: dict[str, BaseSuite]
    # Whether the base has an evalgate config at all.
    configured: bool = True

    @property
    def holdout(self) -> tuple[Case, ...]:
        return tuple(c for s in self.suites.values() for c in s.holdout)

    @property
    def holdout_hashes(self) -> frozenset[str]:
        return frozenset(c.hash for c in self.holdout)


def read_base(config: Path | None) -> BaseSplit:
    """The split of every suite of the base's config (copied by :func:`materialize`)."""
    if config is None:
        return BaseSplit(suites={}, configured=False)
    loaded = _load(config)
    suites = {}
    for name, suite in loaded.config.suites.items():
        try:
            read = read_suite_cases(loaded, suite)
        except UserError as exc:
            raise BaseUnavailable(
                f"the base commit's cases of suite {name!r} cannot be read: {exc.what}",
                fix="fix the case files on the default branch first",
            ) from None
        sides = {c.id: assign(c, suite.split) for c in read.cases}
        holdout = tuple(c for c in read.cases if sides[c.id] == "holdout")
        sealed = Counter[str]()
        if suite.sealed_holdout is not None:
            sealed = _lines(loaded.root / suite.sealed_holdout.file)
        suites[name] = BaseSuite(
            suite=suite,
            splits=sides,
            hashes={c.id: c.hash for c in read.cases},
            holdout=holdout,
            holdout_groups=frozenset(group_key(c, suite.split) for c in holdout),
            sealed=sealed,
            public=tuple(c for c in read.cases if sides[c.id] != "holdout"),
        )
    return BaseSplit(suites=suites)


class HoldoutChange(BaseModel):
    """What a pull request's own files change about the base's holdout (counts only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Base holdout cases that the head's own policy would no longer hold out.
    moved: int = 0
    # Base holdout cases the head no longer has.
    removed: int = 0
    # Base holdout cases the head edited.
    edited: int = 0
    # New cases that copy a base holdout case (its words, through the head's template) and
    # that the head's own split would have shown.
    copied: int = 0
    # Settings of the split that the head changes (salt, holdout_fraction, ...).
    policy: list[str] = []
    # Sealed lines the head removes or alters (adding lines is how cases are added).
    sealed_removed: int = 0
    # Suites with holdout cases at the base that the head no longer defines.
    suites_removed: list[str] = []

    @property
    def cases(self) -> int:
        return self.moved + self.removed + self.edited + self.copied + self.sealed_removed

    @property
    def changed(self) -> bool:
        return bool(self.cases or self.policy or self.suites_removed)

    def line(self) -> str:
        parts = []
        for count, what in (
            (self.moved, "moved out of the holdout"),
            (self.removed, "removed"),
            (self.edited, "edited"),
            (self.copied, "copied into new cases"),
            (self.sealed_removed, "sealed cases removed or altered"),
        ):
            if count:
                parts.append(f"{count} {what}")
        if self.policy:
            parts.append(f"changes {', '.join(self.policy)}")
        if self.suites_removed:
            parts.append(f"drops {len(self.suites_removed)} suites that hold cases out")
        return (
            f"this pull request changes the holdout: {self.cases} cases ({'; '.join(parts)}); "
            "the split is decided on the default branch, after review, so this job used the "
            "default branch's split and cannot pass: make the change on the default branch"
        )


# The settings whose change at the head moves cases between the sides.
_POLICY = ("salt", "holdout_fraction", "group_field")
_FIELDS = ("id", "input", "group", "split")


def _policy_changes(base: Suite, head: Suite) -> list[str]:
    changed = [f"split.{k}" for k in _POLICY if getattr(base.split, k) != getattr(head.split, k)]
    changed += [
        f"fields.{k}" for k in _FIELDS if getattr(base.fields, k) != getattr(head.fields, k)
    ]
    if base.cases_format != head.cases_format:
        changed.append("cases_format")
    if base.cases_format_fields != head.cases_format_fields:
        changed.append("cases_format_fields")
    if base.sealed_holdout != head.sealed_holdout:
        changed.append("sealed_holdout")
    return changed


def relative_config(top: Path, config: Path) -> str:
    """``config``'s path inside the repository at ``top``, as the base commit would hold it.

    Refused when it leaves the repository or passes through a symbolic link: a link would let
    the pull request choose which of the base's files (or none) the split is read from.
    """
    absolute = Path(os.path.abspath(config))
    for root in (Path(os.path.abspath(top)), Path(os.path.realpath(top))):
        try:
            relative = absolute.relative_to(root)
            break
        except ValueError:
            continue
    else:
        raise BaseUnavailable(
            "the config is outside the repository, so the default branch's split cannot be read",
            where=str(config),
        )
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise BaseUnavailable(
                f"the config's path goes through a symbolic link ({current.relative_to(root)}), "
                "so the pull request would choose where the default branch's split is read "
                "from",
                where=str(config),
                fix="keep evalgate.yml and its folders real files and folders",
            )
    return relative.as_posix()


def read_tree(tree: Tree, config: str, head: LoadedConfig | None = None) -> BaseSplit:
    """The split of the commit ``tree`` holds, for the config at ``config`` (repo-relative).

    When the base has no config there, nothing is held out at the base, unless the case files
    the head's config reads are already there: then the head has moved (or linked) the config
    over existing cases, and its own split cannot be trusted.
    """
    with tempfile.TemporaryDirectory(prefix="evalgate-base-") as folder:
        copied = materialize(tree, config, Path(folder))
        if copied is None and head is not None:
            existing = _existing_cases(tree, config, head)
            if existing:
                raise BaseUnavailable(
                    f"the default branch has no evalgate config at {config}, yet it has the "
                    f"case files this pull request's config reads ({existing}): the split of "
                    "existing cases is the default branch's to decide",
                    fix="add or move the config on the default branch first",
                )
        return read_base(copied)


def _existing_cases(tree: Tree, config: str, head: LoadedConfig) -> str | None:
    folder = posixpath.dirname(config)
    for suite in head.config.suites.values():
        for pattern in suite.cases:
            path = posixpath.normpath(posixpath.join(folder, pattern))
            if _inside(path):
                for match in _glob(tree, path):
                    if tree.read(match) is not None:
                        return match
    return None


def guard(
    base: BaseSplit, name: str, head: LoadedConfig
) -> tuple[Callable[[CaseSet], CaseSet], Callable[[], HoldoutChange]]:
    """An ``assign`` for :func:`evalgate.pipeline.load_suite_cases` that applies the base's
    split to the head's cases of suite ``name``, and a function that then tells what the head
    changes about the holdout."""
    suite = head.config.suites[name]
    dropped = dropped_suites(base, head)
    made: list[HoldoutChange] = []

    def apply(read: CaseSet) -> CaseSet:
        cases, change = hold_out(base, name, suite, read.cases, head.root)
        made.append(change.model_copy(update={"suites_removed": dropped}))
        return CaseSet(cases=tuple(cases), file_hashes=read.file_hashes)

    def change() -> HoldoutChange:
        return made[-1] if made else HoldoutChange(suites_removed=dropped)

    return apply, change


def hold_out(
    base: BaseSplit, name: str, suite: Suite, cases: tuple[Case, ...], root: Path
) -> tuple[list[Case], HoldoutChange]:
    """The head's cases with the base's split, and what the head changes about the holdout."""
    if not base.configured:
        # Nothing is held out at the base: the head's own policy decides, and moves nothing.
        return [c.model_copy(update={"split": assign(c, suite.split)}) for c in cases], (
            HoldoutChange()
        )
    own = base.suites.get(name)
    policy = own.suite.split if own else _strictest(base, suite.split)
    texts = {
        _skeleton(input_text(c, bookkeeping(s.suite.fields)))
        for s in base.suites.values()
        for c in s.holdout
    }
    hashes = base.holdout_hashes
    ids = {c.id for c in own.holdout} if own else set()
    groups = own.holdout_groups if own else frozenset()
    # A case unchanged since the base keeps the base's split; the rest are new or edited, and
    # any of those whose user turn (what the model would receive, through the head's own
    # template) copies a base holdout case is held out.
    unchanged = {c.id for c in cases if own is not None and own.hashes.get(c.id) == c.hash}
    changed = [c for c in cases if c.id not in unchanged]
    shown = {c.id: _shown(c, suite) for c in changed}
    near = _copies(shown, base.holdout, policy)

    out: list[Case] = []
    moved = edited = copied = 0
    for case in cases:
        mine = assign(case, suite.split)
        held = (
            case.id in ids
            or case.hash in hashes
            or shown.get(case.id) in texts
            or case.id in near
            or group_key(case, policy) in groups
        )
        if own is not None and case.id in unchanged:
            side = own.splits[case.id]
            if side == "holdout" and mine != "holdout":
                moved += 1
        elif held:
            side = "holdout"
            if case.id in ids and case.hash not in hashes:
                edited += 1
            elif (case.id in ids or case.hash in hashes) and mine != "holdout":
                moved += 1
            elif mine != "holdout" and (case.id in near or shown.get(case.id) in texts):
                copied += 1
        elif own is not None and case.id in own.splits:
            side = own.splits[case.id]
        elif case.split is not None:
            side = case.split
        else:
            side = hashed_side(group_key(case, policy), policy)
        out.append(case.model_copy(update={"split": side}))

    change = HoldoutChange(moved=moved, edited=edited, copied=copied)
    if own is not None:
        head_ids = {c.id for c in cases}
        head_hashes = {c.hash for c in cases}
        removed = sum(1 for c in own.holdout if c.id not in head_ids and c.hash not in head_hashes)
        sealed_removed = 0
        if own.sealed:
            head_sealed = (
                _lines(root / suite.sealed_holdout.file) if suite.sealed_holdout else Counter()
            )
            sealed_removed = sum((own.sealed - head_sealed).values())
        change = change.model_copy(
            update={
                "removed": removed,
                "policy": _policy_changes(own.suite, suite),
                "sealed_removed": sealed_removed,
            }
        )
    return out, change


def _copies(shown: dict[str, str], holdout: tuple[Case, ...], policy: SplitPolicy) -> set[str]:
    """Ids whose shown text contains most of a holdout case's word shingles.

    Containment (shared shingles over the holdout case's), not Jaccard: a holdout message with
    words added around it is still that message. Shingles are as long as the policy says, or
    as the holdout text when it is shorter (two words at least: one word is not a case).
    """
    index: dict[tuple[int, str], list[int]] = defaultdict(list)
    sizes: list[int] = []
    for i, h in enumerate(holdout):
        words = _skeleton(input_text(h)).split()
        size = min(policy.shingle_words, len(words))
        grams = _grams(words, size) if size >= 2 else set()
        sizes.append(len(grams))
        for gram in grams:
            index[(size, gram)].append(i)
    lengths = sorted({k for k, _ in index})
    found = set()
    for case_id, text in shown.items():
        words = text.split()
        shared: Counter[int] = Counter()
        for size in lengths:
            for gram in _grams(words, size):
                shared.update(index.get((size, gram), ()))
        if any(n / sizes[i] >= policy.near_duplicate for i, n in shared.items()):
            found.add(case_id)
    return found


# Letters of other scripts that render like Latin ones (Unicode's confusables, the common
# ones): a copy spelled with them reads the same to the model and to a reviewer.
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁһԛԝвмнткАВЕКМНОРСТХУІЈЅαβεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhqwbmhtkABEKMHOPCTXYIJSabeikvoptuxABEZHIKMNOPTYX",
)


def _skeleton(text: str) -> str:
    """Words as a reader sees them: compatibility forms folded, marks and invisible format
    characters (zero-width spaces, joiners, bidi controls) dropped, look-alike letters mapped
    to Latin, case folded, and ``_`` a separator like any punctuation."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))
    return " ".join(re.findall(r"[^\W_]+", text.translate(_LOOKALIKES).casefold()))


def _shown(case: Case, suite: Suite) -> str:
    """The case's user turn through the head's template (every input value when it fails)."""
    try:
        turn = render_turn(compile_template(suite.template, "template"), case.input, "template")
    except UserError:
        turn = " ".join(str(v) for v in case.input.values())
    return _skeleton(turn)


def _strictest(base: BaseSplit, head: SplitPolicy) -> SplitPolicy:
    """For a suite the base does not have: its own salt and fraction (none of its cases is
    holdout at the base), but the strictest copy check of any base suite (or the default)."""
    policies = [s.suite.split for s in base.suites.values()] + [SplitPolicy()]
    return head.model_copy(
        update={
            "near_duplicate": min(p.near_duplicate for p in policies),
            "shingle_words": min(p.shingle_words for p in policies),
        }
    )


def _grams(words: list[str], size: int) -> set[str]:
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def dropped_suites(base: BaseSplit, head: LoadedConfig) -> list[str]:
    """Suites that hold cases out at the base and that the head no longer defines."""
    return sorted(
        name
        for name, s in base.suites.items()
        if (s.holdout or s.sealed) and name not in head.config.suites
    )

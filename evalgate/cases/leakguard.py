"""One guard where data leaves the process: no request carries a holdout text.

Every request a pull-request or fork job is about to send (the system prompt, every turn, the
tools offered, the case's fixtures, the tools' results, the judge's requests, a tool command's
stdin) passes :meth:`LeakGuard.refusal` before it goes. The guard compares the request's whole
text with the base branch's holdout texts (each text of each holdout case, and the judge's
holdout labels) as a reader would see them:

* NFKC, then Unicode's default-ignorable code points removed (zero-width characters, bidi
  controls, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, tags; the property as the
  ``regex`` module's current Unicode data has it);
* the UTS #39 skeleton, from Unicode's own confusables.txt (as the ``confusable-homoglyphs``
  package ships it), joined with case folding, so that ``ɑ``, ``օ``, ``ҽ`` and the rest read
  as the letters they imitate, in either case; combining marks dropped;
* punctuation and symbols deleted (``re.fund`` is ``refund``), words split at white space;
* then containment: a request that holds at least :data:`THRESHOLD` of a holdout text's
  8-word shingles, or of the 24-letter runs of its letters (spaces and punctuation ignored),
  carries that text; a text of 2 to 7 words must appear whole, words in order.

The index is made once per job and a check is set look-ups over the request's shingles. Each
text's share of them (the index's grams it holds, and its ends, from which the grams that cross
into the next text are made) is kept by the text's hash: the system prompt and the tool
definitions, the same in every request, are normalised and shingled once a job
(``python -m benchmarks.leakguard`` measures it).
Holdout texts that a public case (dev or regression, or a dev label) of the base already
carries are left out: a preamble every case shares is no leak. Nothing here is shown: a hit
says which part of the request carries a holdout case, never which case or what it says.

The copy check in base_split.py stays as a second line (it holds copies out before the run);
this guard is what holds whatever the templates or files do at run time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

SHINGLE_WORDS = 8
# Holdout texts of fewer words are matched whole; one word is no case at all.
MIN_WORDS = 2
LETTER_RUN = 24
# The share of a holdout text's shingles (or letter runs) a request must hold to carry it.
THRESHOLD = 0.5
# A human label's reply is what any model may answer when it is short: only longer ones count.
MIN_REPLY_WORDS = SHINGLE_WORDS
# How many texts' pieces (see LeakIndex.pieces) an index keeps: the system prompt and tool
# definitions repeat in every request; a job's other texts are seen once or a few times.
PIECES_KEPT = 4096


@lru_cache(maxsize=1)
def _patterns() -> tuple[Any, Any, Any]:
    """Default-ignorables, marks, and what is neither a letter, a digit nor a space: compiled at
    the first text read: a run without a guard reads none, and need not import ``regex``."""
    import regex

    return (
        regex.compile(r"\p{Default_Ignorable_Code_Point}+"),
        regex.compile(r"\p{M}+"),
        regex.compile(r"[^\p{L}\p{N}\s]+"),
    )


class HoldoutLeak(UserError):
    """A request about to be sent carries a holdout case: it is not sent, and the job stops."""


def _confusables_file() -> Path:
    spec = importlib.util.find_spec("confusable_homoglyphs")
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise UserError(
            "the confusable-homoglyphs package is not installed: the holdout guard needs "
            "Unicode's confusables data",
            fix="pip install confusable-homoglyphs",
        )
    return Path(next(iter(locations))) / "confusables.json"


def _pairs() -> Iterator[tuple[str, str]]:
    """Unicode's confusables.txt, as the package ships it: each line's two sides, in both
    directions (left-to-right marks it puts around right-to-left letters taken off)."""
    data = json.loads(_confusables_file().read_text(encoding="utf-8"))
    for key, entries in data.items():
        for entry in entries:
            yield key.replace("\u200e", ""), str(entry["c"]).replace("\u200e", "")


@lru_cache(maxsize=1)
def prototypes() -> dict[int, str]:
    """A translation table that maps each letter to its confusable class's one spelling.

    confusables.txt maps each source letter to its prototype, and no prototype is a source,
    so its lines make stars around the prototypes. The package keeps both directions of
    each line: a class with two or more sources still shows its centre (the one member
    linked to all others), and a class of one source and its prototype may take either
    spelling, as long as it is one: ASCII first, then a sequence (a prototype, never a
    source, such as ``rn`` for ``m``), then the lowest code point.
    """
    links: dict[str, set[str]] = {}
    for a, b in _pairs():
        if a and b and a != b:
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)
    table: dict[int, str] = {}
    for node, linked in links.items():
        if len(node) != 1:
            continue
        if len(linked) > 1:
            continue  # a centre: the prototype itself
        (other,) = linked
        if len(links.get(other, ())) > 1:
            table[ord(node)] = other  # a source of a class with a centre
            continue
        spelling = min((node, other), key=lambda x: (not x.isascii(), len(x) == 1, x))
        if spelling != node:
            table[ord(node)] = spelling
    return table


@lru_cache(maxsize=1)
def reading() -> dict[int, str]:
    """The skeleton and ASCII case as one table: letters confusable in either case (``I``,
    ``l``, ``1`` and ``ı``; ``m`` and ``rn``) read as one spelling, a sequence where the class
    has one (as UTS #39 spells ``m``), else lower-case ASCII, else the lowest code point."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for source, target in prototypes().items():
        union(chr(source), target)
    # Case joins only ASCII pairs here: across scripts it would chain shapes that differ
    # (Greek H and eta, which looks like n); other letters are case-folded in the text.
    for upper in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        union(upper, upper.lower())
    members: dict[str, list[str]] = {}
    for node in list(parent):
        members.setdefault(find(node), []).append(node)
    table: dict[int, str] = {}
    for group in members.values():
        spelling = min(
            group, key=lambda x: (len(x) == 1, not (x.isascii() and x.islower()), len(x), x)
        )
        table.update({ord(x): spelling for x in group if len(x) == 1 and x != spelling})
    return table


@lru_cache(maxsize=4096)
def words(text: str) -> tuple[str, ...]:
    """The words of ``text`` as a reader sees them (see the module's docstring)."""
    ignorable, marks, not_word = _patterns()
    text = ignorable.sub("", unicodedata.normalize("NFKC", text))
    table = reading()
    text = unicodedata.normalize("NFD", text).translate(table).casefold().translate(table)
    text = marks.sub("", unicodedata.normalize("NFD", text)).casefold()
    return tuple(not_word.sub("", text).split())


def _grams(seq: Sequence[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(seq[i : i + size]) for i in range(len(seq) - size + 1)}


def _runs(letters: str) -> set[str]:
    return {letters[i : i + LETTER_RUN] for i in range(len(letters) - LETTER_RUN + 1)}


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value (keys too), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)
    elif value is not None and not isinstance(value, bool | int | float):
        yield json.dumps(value, default=str)


def _over(grams: Iterable[Any], table: dict[Any, list[int]], sizes: dict[int, int]) -> set[int]:
    """The texts of which at least THRESHOLD of their grams are among ``grams``."""
    shared = Counter[int]()
    for gram in grams:
        hit = table.get(gram)
        if hit:
            shared.update(hit)
    return {n for n, k in shared.items() if k >= THRESHOLD * sizes[n]}


@dataclass(frozen=True)
class Pieces:
    """What one text of a request brings to the containment check, made once per text.

    The grams of the index that lie inside the text (most texts hold none), and its ends: the
    shingles and letter runs that cross from one text into the next are made from the ends
    when the request's texts are read as one.
    """

    short: frozenset[int]
    long: frozenset[tuple[str, ...]]
    letters: frozenset[str]
    head: tuple[str, ...]  # its first and last SHINGLE_WORDS - 1 words (all, when fewer)
    tail: tuple[str, ...]
    first: str  # its first and last LETTER_RUN - 1 letters
    last: str


class LeakIndex:
    """The base's holdout texts, as shingles, ready for cheap containment look-ups."""

    def __init__(self, holdout: Iterable[str], public: Iterable[str] = ()) -> None:
        self._long: dict[tuple[str, ...], list[int]] = {}
        self._short: dict[tuple[str, ...], list[int]] = {}
        self._letters: dict[str, list[int]] = {}
        self._sizes: dict[int, int] = {}
        self._letter_sizes: dict[int, int] = {}
        seen: set[tuple[str, ...]] = set()
        for text in holdout:
            w = words(text)
            if len(w) < MIN_WORDS or w in seen:
                continue
            seen.add(w)
            n = len(seen) - 1
            if len(w) < SHINGLE_WORDS:
                self._short.setdefault(w, []).append(n)
            else:
                grams = _grams(w, SHINGLE_WORDS)
                self._sizes[n] = len(grams)
                for gram in grams:
                    self._long.setdefault(gram, []).append(n)
            runs = _runs("".join(w))
            if runs:
                self._letter_sizes[n] = len(runs)
                for run in runs:
                    self._letters.setdefault(run, []).append(n)
        self._short_lengths = sorted({len(w) for w in self._short})
        self._pieces: OrderedDict[bytes, Pieces] = OrderedDict()
        self._lock = threading.Lock()
        self.size = len(seen)
        # What public cases already carry is no leak: those texts are left out.
        self._dead: set[int] = set()
        for text in public:
            self._dead |= self.carried(words(text))

    @property
    def live(self) -> int:
        """How many holdout texts the guard holds (after leaving out the public ones)."""
        return self.size - len(self._dead)

    def carried(self, seq: Sequence[str]) -> set[int]:
        """The holdout texts (by index) that a text of these words carries."""
        found: set[int] = set()
        for size in self._short_lengths:
            for gram in _grams(seq, size):
                hit = self._short.get(gram)
                if hit:
                    found.update(hit)
        if len(seq) >= SHINGLE_WORDS and self._long:
            found |= _over(_grams(seq, SHINGLE_WORDS), self._long, self._sizes)
        if self._letters:
            found |= _over(_runs("".join(seq)), self._letters, self._letter_sizes)
        return found - self._dead

    def _kept(self, key: bytes) -> Pieces | None:
        with self._lock:
            kept = self._pieces.get(key)
            if kept is not None:
                self._pieces.move_to_end(key)
            return kept

    def _keep(self, key: bytes, pieces: Pieces) -> Pieces:
        with self._lock:
            self._pieces[key] = pieces
            if len(self._pieces) > PIECES_KEPT:
                self._pieces.popitem(last=False)
        return pieces

    def pieces(self, texts: Sequence[str]) -> Pieces:
        """The :class:`Pieces` of texts read as one (their words in a row), kept by the hash of
        the texts: the system prompt and the tool definitions, the same in every request of a
        job, are normalised and shingled once."""
        key = hashlib.sha256(
            json.dumps(list(texts), ensure_ascii=False).encode("utf-8", "surrogatepass")
        ).digest()
        kept = self._kept(key)
        if kept is not None:
            return kept
        if len(texts) != 1:
            return self._keep(key, self.join([self.pieces([text]) for text in texts]))
        seq = words(texts[0])
        letters = "".join(seq)
        edge, run = SHINGLE_WORDS - 1, LETTER_RUN - 1
        return self._keep(
            key,
            Pieces(
                short=frozenset(
                    n
                    for size in self._short_lengths
                    for gram in _grams(seq, size)
                    for n in self._short.get(gram, ())
                ),
                long=frozenset(g for g in _grams(seq, SHINGLE_WORDS) if g in self._long),
                letters=frozenset(r for r in _runs(letters) if r in self._letters),
                head=seq[:edge],
                tail=seq[-edge:],
                first=letters[:run],
                last=letters[-run:],
            ),
        )

    def join(self, pieces: Sequence[Pieces]) -> Pieces:
        """The pieces of texts read one after another (their words in a row): each text's
        grams, and the grams that cross between neighbours, made from their ends."""
        short: set[int] = set()
        long: set[tuple[str, ...]] = set()
        letters: set[str] = set()
        edge, run = SHINGLE_WORDS - 1, LETTER_RUN - 1
        # The first and last SHINGLE_WORDS - 1 words (and LETTER_RUN - 1 letters) so far:
        # every gram that crosses into the next text starts in the last ones.
        head: tuple[str, ...] = ()
        tail: tuple[str, ...] = ()
        first = last = ""
        for piece in pieces:
            short |= piece.short
            long |= piece.long
            letters |= piece.letters
            if tail and piece.head:
                across = tail + piece.head
                for size in self._short_lengths:
                    for gram in _grams(across, size):
                        short.update(self._short.get(gram, ()))
                long.update(g for g in _grams(across, SHINGLE_WORDS) if g in self._long)
            if last and piece.first:
                letters.update(r for r in _runs(last + piece.first) if r in self._letters)
            head = (head + piece.head)[:edge]
            first = (first + piece.first)[:run]
            # A text shorter than the ends: the ends run on from the texts before it.
            tail = (tail + piece.head)[-edge:] if len(piece.head) < edge else piece.tail
            last = (last + piece.first)[-run:] if len(piece.first) < run else piece.last
        return Pieces(
            frozenset(short), frozenset(long), frozenset(letters), head, tail, first, last
        )

    def held(self, pieces: Pieces) -> set[int]:
        """The holdout texts (by index) that the texts of these pieces carry: the same answer
        as :meth:`carried` of all their words."""
        found = set(pieces.short)
        if pieces.long:
            found |= _over(pieces.long, self._long, self._sizes)
        if pieces.letters:
            found |= _over(pieces.letters, self._letters, self._letter_sizes)
        return found - self._dead

    def carries(self, texts: Iterable[str]) -> bool:
        """Whether these texts, read as one, carry any holdout text."""
        return bool(self.held(self.pieces(list(texts))))


# A part of a request: what a refusal calls it, and its texts.
Part = tuple[str, list[str]]


def request_parts(request: Any, role: str) -> list[Part]:
    """The parts of a request (a ``Request``) that leave the process, each named for a line.

    ``role`` is ``model`` (the system under test) or ``judge``.
    """
    case = request.case.get("id") if isinstance(request.case, dict) else None
    of = f" of case {case}" if case else ""
    if role == "judge":
        parts: list[Part] = [
            ("the judge's system prompt", [request.system]),
            ("a request to the judge (its rubric, a case or a reply)", []),
        ]
        parts[1][1].extend(m.content for m in request.messages)
    else:
        turns = list(request.messages)
        parts = [
            ("the system prompt", [request.system]),
            (f"earlier turns{of}", [m.content for m in turns[:-1]]),
            (f"the user turn{of}", [m.content for m in turns[-1:]]),
        ]
    parts.append(("the model's options", list(strings(request.options))))
    agent = request.agent
    if agent is not None:
        parts.append(("the tool definitions", list(strings([t.model_dump() for t in agent.tools]))))
        parts.append((f"the fixtures{of}", list(strings(agent.fixtures))))
    return parts


@dataclass
class LeakGuard:
    """The job's guard: the index, and the first refusal (after which nothing more is sent)."""

    index: LeakIndex
    # The first hit's line; once set, every later request of the job is refused too.
    tripped: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def refusal(self, parts: Sequence[Part]) -> str | None:
        """None when the parts may be sent; else the one line that says why not."""
        if self.tripped is not None:
            return f"not sent: the job stopped sending because {self.tripped}"
        index = self.index
        named = [(name, index.pieces(texts)) for name, texts in parts if texts]
        if not index.held(index.join([pieces for _, pieces in named])):
            return None
        hit = next((name for name, pieces in named if index.held(pieces)), "the request")
        plural = hit.partition(" of case ")[0].endswith("s")
        line = f"{hit} {'carry' if plural else 'carries'} a holdout case"
        with self._lock:
            if self.tripped is None:
                self.tripped = line
        return f"not sent: {line}"

    def check(self, name: str, text: str) -> str | None:
        """One part (a tool's result, a tool command's stdin): None, or the refusal line."""
        return self.refusal([(name, [text])])

    def leak(self) -> HoldoutLeak | None:
        """The job's refusal as an error, once a request was refused."""
        if self.tripped is None:
            return None
        return HoldoutLeak(
            f"{self.tripped}: it was not sent, nor anything after it",
            fix="take the base branch's holdout cases out of the pull request's prompts, "
            "cases, templates and files; holdout cases are for the release gate only",
        )


def guard_of(holdout: Iterable[str], public: Iterable[str] = ()) -> LeakGuard:
    return LeakGuard(LeakIndex(holdout, public))


def case_texts(case: Any) -> Iterator[str]:
    """Every text of a case the model could be shown: input values, earlier turns, fixtures."""
    yield from strings(case.input)
    for turn in case.messages:
        yield str(turn.get("content", ""))
    if case.fixtures:
        yield from strings(case.fixtures)


def label_texts(label: Any) -> Iterator[str]:
    """A human label's texts: its case's, and its reply when it is long enough to tell."""
    yield from case_texts(label.case)
    if len(words(label.reply)) >= MIN_REPLY_WORDS:
        yield label.reply


def holdout_index(holdout: Iterable[Any], public: Iterable[Any] = ()) -> LeakIndex:
    """The index of holdout cases' texts, less what the public cases carry."""
    return LeakIndex(
        [t for c in holdout for t in case_texts(c)], [t for c in public for t in case_texts(c)]
    )


def contamination(index: LeakIndex, texts: dict[str, str]) -> list[str]:
    """The names of ``texts`` (a shipped prompt's files, by name) that carry holdout cases."""
    return [name for name, text in texts.items() if index.carries([text])]


@dataclass(frozen=True)
class LeakGuards:
    """A pull-request job's two guards, made from the base commit once per job."""

    # Every request of the runs (the model's and the judge's).
    runs: LeakGuard
    # The judge check's requests, which send the base's labels by design: the labels' own
    # texts pass; anything else (the rubric, say) must still be clear.
    judge_check: LeakGuard

    def leak(self) -> HoldoutLeak | None:
        return self.runs.leak() or self.judge_check.leak()


def base_guards(
    holdout: Iterable[Any],
    public: Iterable[Any],
    holdout_labels: Sequence[Any] = (),
    dev_labels: Sequence[Any] = (),
) -> LeakGuards:
    """The guards of a pull-request job: from the base's holdout cases and judge labels, less
    what the base's public cases (and dev labels) already carry."""
    held = [t for c in holdout for t in case_texts(c)]
    shown = [t for c in public for t in case_texts(c)]
    runs = guard_of(
        held + [t for x in holdout_labels for t in label_texts(x)],
        shown + [t for x in dev_labels for t in label_texts(x)],
    )
    labels = [t for x in (*holdout_labels, *dev_labels) for t in label_texts(x)]
    return LeakGuards(runs=runs, judge_check=guard_of(held, shown + labels))

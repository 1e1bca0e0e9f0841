"""What one render of a template may spend: output, the values it builds, steps and time.

A prompt file or user-turn template comes from the pull request, so a render must end soon and
small whatever it says. The sandbox (templating.py) asks this module before every operation
that can build a large value (a filter, a method call, an operator, ``~``, a format, an output)
and charges what was built; a trace of the template's own lines counts its steps and watches
the clock, so a loop that builds nothing still ends. Every limit is far above what a prompt
needs and far below what would hurt the job.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import FrameType
from typing import Any

# The text one render may produce, and the longest string or list one operation may build.
MAX_OUTPUT = 1 << 20
MAX_PRODUCT = 1_000_000
# Everything the operations of one render build, together (characters or items).
MAX_WORK = 8 * MAX_PRODUCT
# A width, precision, indent or count that a filter, method or format spec is given.
MAX_WIDTH = 10_000
# The largest integer an operation may make, in bits (str() refuses past 4300 digits anyway).
MAX_INT_BITS = 1 << 16
# Lines of the template run, and seconds, a render may take; and the seconds all renders of
# one compiled template may take together (a template slow on every case of a large suite).
MAX_STEPS = 1_000_000
MAX_SECONDS = 2.0
MAX_TOTAL_SECONDS = 20.0
# The filename jinja2 gives the code compiled from a template string.
TEMPLATE_CODE = "<template>"


class OverBudget(Exception):
    """An operation would build more than a template may."""


class OutOfTime(BaseException):
    """The render ran too many steps or too long. A BaseException: it is raised from the trace
    inside whatever code runs, and no ``except Exception`` on the way may swallow it."""


class Budget:
    """What one render has spent."""

    def __init__(self, seconds: float = MAX_SECONDS) -> None:
        self.work = 0
        self.steps = 0
        self.calls = 0
        self.started = time.monotonic()
        self.seconds = min(seconds, MAX_SECONDS)
        self.over: str | None = None

    def charge(self, value: Any) -> Any:
        """Count what an operation built; returns it."""
        if isinstance(value, str | bytes | list | tuple | dict):
            self.work += len(value)
            if self.work > MAX_WORK:
                raise OverBudget(f"the template builds more than {MAX_WORK:,} characters in all")
        return value

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            self.over = f"it runs more than {MAX_STEPS:,} steps"
        elif self.steps & 1023 == 0:
            self._clock()
        if self.over is not None:
            raise OutOfTime(self.over)

    def tick(self) -> None:
        """A function call during the render (the template's or any code it runs)."""
        self.calls += 1
        if self.calls & 255 == 0:
            self._clock()
        if self.over is not None:
            raise OutOfTime(self.over)

    def _clock(self) -> None:
        if time.monotonic() - self.started > self.seconds:
            self.over = over_time(self.seconds)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


_CURRENT: ContextVar[Budget | None] = ContextVar("template_budget", default=None)


def current() -> Budget:
    """The running render's budget; outside a render (jinja2 folds constants while compiling)
    a fresh one, so each operation is still checked alone."""
    return _CURRENT.get() or Budget()


def over_time(seconds: float) -> str:
    """Why a render given ``seconds`` (its own limit, or what its template has left) stopped."""
    if seconds == MAX_SECONDS:
        return f"it runs longer than {MAX_SECONDS:g} s"
    return f"its renders take longer than {MAX_TOTAL_SECONDS:g} s in all"


@contextmanager
def rendering(seconds: float = MAX_SECONDS) -> Iterator[Budget]:
    """Run a render under a new budget of at most ``seconds``, its template lines traced
    (steps and time)."""
    budget = Budget(seconds)
    if budget.seconds <= 0:
        budget.over = over_time(budget.seconds)
        raise OutOfTime(budget.over)
    token = _CURRENT.set(budget)

    def lines(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            budget.step()
        return lines

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        budget.tick()
        return lines if frame.f_code.co_filename == TEMPLATE_CODE else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        yield budget
    finally:
        sys.settrace(previous)
        _CURRENT.reset(token)


# --- sizes -----------------------------------------------------------------------------------

# Objects of the template language that print what they hold (jinja2's namespace), and how to
# reach it: filled in by templating.py, the one importer of jinja2 here.
HOLDERS: dict[type, Callable[[Any], Any]] = {}


def text_size(value: Any, limit: int) -> int:
    """An upper bound of ``len(str(value))``, counted without building it, stopping once past
    ``limit``: a list that holds one long string a thousand times is short in memory and
    enormous as text."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            total += len(item) + 3
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, bool | float | complex) or item is None:
            total += 32
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        elif type(item) in HOLDERS:
            total += 16
            stack.append(HOLDERS[type(item)](item))
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            total += 200  # an object's repr: a name and an address
    return total


def limit_text(value: Any, limit: int = MAX_PRODUCT) -> None:
    """Refuse to turn ``value`` into text when the text would pass ``limit``."""
    size = text_size(value, limit)
    if size > limit:
        raise OverBudget(f"a value would print as more than {limit:,} characters")


def limit_size(size: int, what: str = "the result") -> None:
    if size > MAX_PRODUCT:
        raise OverBudget(
            f"{what} would hold {size:,} characters or items (at most {MAX_PRODUCT:,})"
        )


def limit_width(value: Any, what: str) -> None:
    if isinstance(value, int) and abs(value) > MAX_WIDTH:
        raise OverBudget(f"{what} {value:,} is over the limit of {MAX_WIDTH:,}")
    if isinstance(value, str) and len(value) > MAX_WIDTH:
        raise OverBudget(f"{what} is a string of over {MAX_WIDTH:,} characters")


def limit_int(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise OverBudget(f"the number would have about {bits:,} bits (at most {MAX_INT_BITS:,})")


# --- format strings --------------------------------------------------------------------------

_NUMBER = re.compile(r"\d+")
# One printf-style conversion: %(key)-08.3f; '*' takes a width from the arguments.
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.DOTALL)


def limit_spec(spec: str) -> int:
    """The largest width or precision in a ``str.format`` spec, checked; returns it."""
    widest = 0
    for digits in _NUMBER.findall(spec):
        if len(digits) > 6 or int(digits) > MAX_WIDTH:
            raise OverBudget(f"a format spec asks for a width of {digits}; at most {MAX_WIDTH:,}")
        widest = max(widest, int(digits))
    return widest


def limit_percent(template: str, args: Any) -> None:
    """Check ``template % args`` before it runs: widths, and the size of what it makes."""
    count, widest = 0, 0
    for match in _PERCENT.finditer(template):
        if match.group(3) == "%":
            continue
        count += 1
        for part in match.group(1, 2):
            if part == "*":
                raise OverBudget("a % format takes its width from the arguments ('*')")
            if part:
                widest = max(widest, limit_spec(part))
    if isinstance(args, tuple):
        values = sum(text_size(a, MAX_PRODUCT) for a in args)
    else:
        values = count * text_size(args, MAX_PRODUCT)
    limit_size(len(template) + count * widest + values)

"""Reports from summary and comparison models, through jinja2 templates in templates/.

Text that comes from cases or model replies is untrusted: the Markdown renderer escapes it so
it cannot ping people, open HTML, break tables or forge a marker.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import jinja2
import markupsafe
from pydantic import BaseModel

from evalgate import __version__, limits
from evalgate.report import template_cache
from evalgate.report.escape import breaks_shown, escape, visible

Format = Literal["text", "markdown", "json"]

OFFLINE_NOTE = (
    "The fake backend is a deterministic offline stand-in: these numbers test the bench, "
    "not a model or a prompt."
)


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def mde(value: float | None) -> str:
    """A minimum detectable effect as shown: "7.8 points", or "none detectable" when no drop the
    suite could show (every case it has breaking) reaches the stated power (it is infinite)."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "none detectable"
    return f"{100 * value:.1f} points"


def interval(low: float, high: float, digits: int = 1) -> str:
    return f"{100 * low:.{digits}f}–{100 * high:.{digits}f}%"


def money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def pvalue(value: float) -> str:
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def excerpt(text: str, limit: int = 90) -> str:
    return limits.excerpt(str(text), limit)


def md(text: object) -> str:
    """Untrusted text as one line of GitHub Markdown (see :func:`escape.escape`), at most
    ``limits.VALUE`` characters of it."""
    return escape(_capped(str(text)), "markdown")


def shell(text: object) -> str:
    """Untrusted text as one shell word (POSIX quoting), for a command a report suggests."""
    return escape(_capped(str(text)), "shell")


def code(text: object) -> str:
    """Untrusted text as an inline code span (see :func:`escape.escape`), capped likewise."""
    return escape(_capped(str(text)), "code")


def log(text: object) -> str:
    """Untrusted text as one line of a CI log: no line break, no workflow command (see
    :func:`escape.escape`)."""
    return escape(str(text), "log")


def line(text: object) -> str:
    """Untrusted text kept whole on one line of plain text (an id, a category): see
    :func:`escape.breaks_shown`."""
    return breaks_shown(str(text))


def _capped(text: str) -> str:
    return text if len(text) <= limits.VALUE else limits.excerpt(text, limits.VALUE)


def duration(seconds: float) -> str:
    """Wall time for people: 2.5 s, 3 min 05 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("evalgate", "report/templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown and terminal text, escaped by the md filter instead
    )
    env.filters.update(
        pct=pct,
        mde=mde,
        interval=interval,
        money=money,
        count=count,
        pvalue=pvalue,
        excerpt=excerpt,
        md=md,
        code=code,
        shell=shell,
        log=log,
        line=line,
        duration=duration,
    )
    env.globals.update(version=__version__, offline_note=OFFLINE_NOTE, interval=interval)
    return env


def _shown(value: Any) -> Any:
    """Every value a page prints, with invisible and bidi characters shown (then escaped);
    text (not the page's own markup) at most ``limits.PAGE_VALUE`` characters."""
    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(visible(str(value)))
    return visible(limits.clip(value, limits.PAGE_VALUE)) if isinstance(value, str) else value


_ENV = _environment()
# The same loader, filters and globals for HTML pages, with autoescaping on: what goes into a
# page is escaped unless a template marks it safe. A template cache of its own, since the
# parent's may hold templates compiled without escaping.
HTML_ENV = _ENV.overlay(autoescape=True, cache_size=400, finalize=_shown)


def template(name: str, environment: jinja2.Environment = _ENV) -> jinja2.Template:
    """A report template, compiled once per cache (see evalgate.report.template_cache)."""
    template_cache.attach(environment, "html" if environment is HTML_ENV else "text")
    return environment.get_template(name)


def compile_all() -> int:
    """Compile every report template into the configured cache (the image does this when it
    is built); how many there are."""
    names = _ENV.list_templates(filter_func=lambda name: name.endswith(".j2"))
    for name in names:
        template(name, HTML_ENV if name.endswith(".html.j2") else _ENV)
    return len(names)


def render(name: str, **context: Any) -> str:
    return template(name).render(**context)


def macros(name: str) -> Any:
    """A template's macros, to render its sections one at a time (e.g. to fit a size limit)."""
    return template(name).module


def render_model(kind: str, model: BaseModel, fmt: Format, **extra: Any) -> str:
    """Render a summary or comparison as text, Markdown or JSON."""
    if fmt == "json":
        return model.model_dump_json(indent=2) + "\n"
    suffix = "txt" if fmt == "text" else "md"
    return render(f"{kind}.{suffix}.j2", s=model, **extra)

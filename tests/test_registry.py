"""Each concept has one list: the scorer kinds are the config's tagged union, the backends the
registry's names, and every other list of them is checked against those here."""

from __future__ import annotations

from evalgate.backends.base import BACKEND_NAMES, backend_class, backend_names
from evalgate.cli.importing import IMPORT_SCORERS
from evalgate.config.models import SCORER_KINDS, TRAJECTORY_KINDS
from evalgate.scorers import base as scorers
from evalgate.setup import init as setup_init


def test_every_scorer_kind_of_the_config_has_a_builder() -> None:
    # judge and all_of are built in build_scorer itself (a judge needs its backend, all_of
    # builds its members); every other kind through the lazy registry.
    assert set(scorers._BUILDERS) | {"judge", "all_of"} == set(SCORER_KINDS)
    assert len(SCORER_KINDS) == len(set(SCORER_KINDS))


def test_the_lists_of_some_kinds_are_kinds() -> None:
    assert set(setup_init.SCORERS) <= set(SCORER_KINDS)
    assert set(IMPORT_SCORERS) <= set(SCORER_KINDS)
    assert set(TRAJECTORY_KINDS) <= set(SCORER_KINDS)
    assert {"tool_sequence", "tool_used", "tool_not_used", "max_steps"} == TRAJECTORY_KINDS


def test_every_registered_backend_is_a_backend_of_that_name() -> None:
    assert setup_init.BACKENDS == BACKEND_NAMES
    assert backend_names() == sorted(BACKEND_NAMES)
    for name in BACKEND_NAMES:
        assert backend_class(name).name == name

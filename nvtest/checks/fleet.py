"""The ``fleet`` fixture: the run's nodes as a fleet-level check sees them.

A check that launches one job over several nodes, or compares a node with the rest of the
fleet, computes that once per run (its first item) and every item reads its node's share::

    @pytest.mark.check("mpi", area="interconnect", title="MPI across all nodes")
    def test_mpi(node, fleet, judge):
        mpi.across(fleet, node, judge)

:class:`Fleet` is owned by the run (:class:`~nvtest.session.context.RunContext`): what
:meth:`Fleet.once` computed lives as long as the run, and two runs never share it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from nvtest.config.thresholds import RecipeSections
from nvtest.jobs.base import check_nodes, launch_nodes, node_recipe

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = ["Fleet", "recipe_model"]

T = TypeVar("T")


def recipe_model(section: str) -> type[BaseModel]:
    """The schema of recipe section ``section`` (:class:`~nvtest.config.thresholds.RecipeSections`).

    Raises:
        KeyError: no such section (the message names it).
    """
    field = RecipeSections.model_fields.get(section)
    if field is None:
        raise KeyError(f"no recipe section {section!r}; known: {', '.join(sorted(RecipeSections.model_fields))}")
    ann = field.annotation
    model = next(a for a in getattr(ann, "__args__", (ann,)) if a is not type(None))
    assert isinstance(model, type) and issubclass(model, BaseModel), (section, model)
    return model


class Fleet:
    """The run's nodes for a fleet-level check: what it computes once, which nodes it runs
    on, and their recipes. ``ctx``: the run (for the library functions a check calls)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def once(self, key: str, fn: Callable[[], T]) -> T:
        """``fn()`` computed once per run and ``key`` (its first caller computes, the others
        wait and get the same value; an exception it raised is raised to every caller)."""
        return self.ctx.fleet_cache.get(key, fn)

    def nodes(self, check: str) -> list[Node]:
        """The reachable nodes ``check`` targets, in inventory order."""
        return check_nodes(self.ctx, check)

    def launch_nodes(self, check: str) -> list[Node]:
        """:meth:`nodes` less those an earlier check failed or hung on: where a multi-node
        launch of ``check`` runs (:func:`nvtest.jobs.base.launch_nodes`)."""
        return launch_nodes(self.ctx, check)

    def recipe(self, node: Node, section: str) -> Any:
        """The node's SKU recipe section ``section`` as its typed model
        (:mod:`nvtest.config.recipes`; every key None or its schema's default where the
        profile does not set it, the check's own default applies then).

        Raises:
            KeyError: ``section`` is not a recipe section.
        """
        return recipe_model(section).model_validate(node_recipe(self.ctx, node, section))

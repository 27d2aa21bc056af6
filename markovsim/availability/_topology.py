r"""Cluster shape and the component counts it implies.

A cluster is ``cards`` accelerators in nodes of ``cards_per_node``, optionally grouped
into supernodes of ``nodes_per_supernode`` nodes, joined by a scale-out network.

**Fat tree / folded Clos.** With switches of radix :math:`k` and :math:`L` levels, a
non-blocking tree holds at most :math:`2 (k/2)^L` endpoints (:math:`k` for one level).
For :math:`E` endpoints (one per card and NIC), every level below the top has
:math:`E / (k/2)` switches and the top :math:`E / k`, so :math:`(2L - 1) E / k` switches
in all; there are :math:`E` endpoint links and :math:`(L - 1) E` switch-to-switch links.
Each optical link carries two optical modules (one at each end). Counts are the
expected numbers for a job of that many cards (fractions allowed: a job spans parts of
switches), not an exact cabling plan.
"""

from __future__ import annotations

import dataclasses
import math

from .._errors import InvalidParameterError, check_integer

__all__ = ["FatTree", "ClusterShape", "fat_tree_levels", "component_counts", "SCOPES"]

#: the scopes a component count can follow
SCOPES = ("card", "node", "supernode", "switch", "optical_module", "link", "job")


def fat_tree_levels(endpoints: int, radix: int) -> int:
    """Fewest levels of a non-blocking fat tree of ``radix``-port switches for ``endpoints``."""
    endpoints = check_integer("endpoints", endpoints, minimum=1)
    radix = check_integer("radix", radix, minimum=2)
    if radix % 2:
        raise InvalidParameterError(f"radix={radix}: expected an even switch radix")
    levels, capacity = 1, radix
    while capacity < endpoints:
        levels += 1
        capacity = 2 * (radix // 2) ** levels
    return levels


@dataclasses.dataclass(frozen=True)
class FatTree:
    """A non-blocking fat tree (folded Clos) scale-out network.

    Attributes:
        radix: ports per switch (even).
        levels: switch levels; ``None`` picks the fewest that fit the job.
        nics_per_card: scale-out ports per card (endpoints per card).
        first_optical_level: links at and above this level are optical: 0 means the
            card-to-leaf links are optical too, 1 means only switch-to-switch links.
    """

    radix: int
    levels: int | None = None
    nics_per_card: int = 1
    first_optical_level: int = 0

    def validate(self) -> "FatTree":
        check_integer("network.radix", self.radix, minimum=2)
        if self.radix % 2:
            raise InvalidParameterError(f"network.radix={self.radix}: expected an even radix")
        if self.levels is not None:
            check_integer("network.levels", self.levels, minimum=1)
        check_integer("network.nics_per_card", self.nics_per_card, minimum=0)
        check_integer("network.first_optical_level", self.first_optical_level, minimum=0)
        return self

    def levels_for(self, endpoints: int) -> int:
        need = fat_tree_levels(max(endpoints, 1), self.radix)
        if self.levels is None:
            return need
        if self.levels < need:
            raise InvalidParameterError(
                f"network.levels={self.levels}: a radix-{self.radix} fat tree of "
                f"{self.levels} level(s) holds {self.capacity()} endpoints, the job needs {endpoints}"
            )
        return self.levels

    def capacity(self) -> int:
        levels = self.levels or 1
        return self.radix if levels == 1 else 2 * (self.radix // 2) ** levels

    def counts(self, endpoints: int) -> dict[str, float]:
        """Expected switch, link and optical-module counts for ``endpoints`` endpoints."""
        levels = self.levels_for(endpoints)
        e = float(endpoints)
        switches = e / self.radix if levels == 1 else (2 * levels - 1) * e / self.radix
        links_per_level = [e] + [e] * (levels - 1)  # level 0 = endpoint links
        optical_links = sum(links_per_level[self.first_optical_level:])
        return {
            "switch": switches,
            "link": sum(links_per_level),
            "optical_module": 2.0 * optical_links,
            "levels": float(levels),
        }


@dataclasses.dataclass(frozen=True)
class ClusterShape:
    """The shape of a cluster: cards, nodes, supernodes and the scale-out network.

    Attributes:
        name: a label.
        cards: accelerators in the cluster.
        cards_per_node: accelerators per server node.
        nodes_per_supernode: nodes per supernode (1 when there are no supernodes).
        network: the scale-out network between nodes (or supernodes).
        optical_modules_per_supernode: optical modules inside one supernode's own
            network (e.g. the CloudMatrix384 unified bus), counted apart from ``network``.
    """

    name: str
    cards: int
    cards_per_node: int
    nodes_per_supernode: int = 1
    network: FatTree = FatTree(radix=64)
    optical_modules_per_supernode: float = 0.0

    def validate(self) -> "ClusterShape":
        check_integer("cluster.cards", self.cards, minimum=1)
        check_integer("cluster.cards_per_node", self.cards_per_node, minimum=1)
        check_integer("cluster.nodes_per_supernode", self.nodes_per_supernode, minimum=1)
        if self.optical_modules_per_supernode < 0:
            raise InvalidParameterError(
                f"cluster.optical_modules_per_supernode={self.optical_modules_per_supernode}: expected >= 0"
            )
        self.network.validate()
        return self

    @property
    def cards_per_supernode(self) -> int:
        return self.cards_per_node * self.nodes_per_supernode


def component_counts(shape: ClusterShape, cards: int | None = None) -> dict[str, float]:
    """Expected number of units of every scope for a job of ``cards`` cards.

    Args:
        shape: the cluster.
        cards: cards the job uses (default: the whole cluster).

    Returns:
        ``{"card", "node", "supernode", "switch", "link", "optical_module", "job",
        "levels"}`` counts (floats).
    """
    cards = shape.cards if cards is None else check_integer("cards", cards, minimum=1)
    nodes = math.ceil(cards / shape.cards_per_node)
    supernodes = math.ceil(nodes / shape.nodes_per_supernode)
    # scale-out endpoints: one per card and NIC (supernodes talk to each other through them)
    net = shape.network.counts(cards * shape.network.nics_per_card) if shape.network.nics_per_card else \
        {"switch": 0.0, "link": 0.0, "optical_module": 0.0, "levels": 0.0}
    return {
        "card": float(cards),
        "node": float(nodes),
        "supernode": float(supernodes),
        "switch": net["switch"],
        "link": net["link"],
        "optical_module": net["optical_module"] + supernodes * shape.optical_modules_per_supernode,
        "job": 1.0,
        "levels": net["levels"],
    }

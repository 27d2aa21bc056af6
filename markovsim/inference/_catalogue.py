"""Per-card fault rates of an inference fleet from the availability fault catalogue.

Inference instances see the same faults as training jobs; what differs is the reaction.
Every fault mode that interrupts a training job also stops the inference instance that
holds the card (S-HW-4). A mode that takes no spare hardware (``spare_nodes == 0``:
software, HBM UCE fixed in place, link flaps) is *soft* here (token-level retry can
absorb it); the others are *hard* (a card must be replaced).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fault_rates_from_catalogue"]


def fault_rates_from_catalogue(catalogue, shape) -> tuple[float, float]:
    """``(card_fault_rate, soft_fault_share)`` for :class:`Fleet` from a fault catalogue.

    Args:
        catalogue: a ``markovsim.availability.FaultCatalogue``.
        shape: the ``markovsim.availability.ClusterShape`` the fleet runs on (network and
            supernode components are spread over its cards).

    Returns:
        the rate per card per second of instance-stopping faults, and the share of that
        rate from modes that replace no hardware.
    """
    from .. import availability as av  # edge import: only when a catalogue is used

    catalogue = catalogue.validate()
    rate = av.per_card_fault_rate(catalogue, shape, effect=av.Effect.INTERRUPT)
    rates = np.asarray(av.mode_rates(catalogue, shape, shape.cards), dtype=float)
    stop = np.array([m.effect is av.Effect.INTERRUPT for m in catalogue.modes])
    soft = np.array([m.spare_nodes == 0 for m in catalogue.modes])
    total = float(rates[stop].sum())
    share = float(rates[stop & soft].sum()) / total if total > 0 else 0.0
    return rate, share

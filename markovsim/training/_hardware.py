"""Hardware: one accelerator's peak rates and memory, and the hierarchy of links around it.

A :class:`LinkLevel` is one tier of the network: ``domain_size`` accelerators share it
(8 in an Atlas 800T A2 node, 768 dies in a CloudMatrix384 supernode, the whole cluster
for the scale-out network), each with ``bandwidth_bytes_per_s`` of its own to the others
at that level (one direction) and a per-message latency ``latency_s``. Levels are ordered
from the innermost; the last one must cover the whole cluster (``domain_size=0`` means
unbounded).

Achievable efficiencies (the fraction of peak FLOP/s that dense matrix multiplications
reach, and the fraction of a link's bandwidth collectives reach) are separate, named
inputs of :class:`Efficiency`, never folded into the peaks.
"""

from __future__ import annotations

import dataclasses

from .._errors import InvalidParameterError, check_positive, check_probability

__all__ = ["LinkLevel", "Hardware", "Efficiency"]


@dataclasses.dataclass(frozen=True)
class LinkLevel:
    """One level of the link hierarchy."""

    name: str
    domain_size: int  # accelerators in one domain of this level (0: unbounded)
    bandwidth_bytes_per_s: float  # per accelerator, one direction
    latency_s: float  # per message (the alpha of the alpha-beta model)


@dataclasses.dataclass(frozen=True)
class Hardware:
    """An accelerator and its links."""

    name: str
    peak_flop_per_s: float  # dense BF16
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    levels: tuple[LinkLevel, ...]

    def validate(self) -> "Hardware":
        check_positive(f"{self.name}.peak_flop_per_s", self.peak_flop_per_s)
        check_positive(f"{self.name}.hbm_bytes", self.hbm_bytes)
        check_positive(f"{self.name}.hbm_bandwidth_bytes_per_s", self.hbm_bandwidth_bytes_per_s)
        if not self.levels:
            raise InvalidParameterError(f"{self.name}.levels: expected at least one link level")
        prev = 1
        for i, lv in enumerate(self.levels):
            check_positive(f"{self.name}.levels[{i}].bandwidth_bytes_per_s", lv.bandwidth_bytes_per_s)
            if lv.latency_s < 0:
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].latency_s={lv.latency_s!r}: expected >= 0")
            last = i == len(self.levels) - 1
            if lv.domain_size == 0 and not last:
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].domain_size=0 (unbounded) is only allowed for the "
                    "outermost level")
            if lv.domain_size and (lv.domain_size <= prev and i or lv.domain_size % prev):
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].domain_size={lv.domain_size}: expected a multiple "
                    f"of the inner level's {prev}, larger than it")
            prev = lv.domain_size or prev
        if self.levels[-1].domain_size != 0:
            raise InvalidParameterError(
                f"{self.name}.levels[-1].domain_size={self.levels[-1].domain_size}: the outermost "
                "level must be unbounded (0), the scale-out network")
        return self

    def level_for_span(self, span: int) -> int:
        """Index of the innermost level whose domain holds ``span`` consecutive accelerators."""
        for i, lv in enumerate(self.levels):
            if lv.domain_size == 0 or span <= lv.domain_size:
                return i
        return len(self.levels) - 1  # pragma: no cover


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak, and how much communication hides behind compute.

    ``compute``: fraction of peak FLOP/s reached by the model's kernels (MFU-relevant);
    ``bandwidth``: fraction of a link's bandwidth a collective reaches; ``*_overlap``:
    fraction of each communication kind hidden behind compute (0 = fully exposed);
    ``usable_memory``: fraction of HBM available to weights, optimizer states and
    activations (the rest: framework workspace, fragmentation, communication buffers).
    """

    compute: float = 0.6
    bandwidth: float = 0.8
    tp_overlap: float = 0.0
    dp_overlap: float = 0.9
    ep_overlap: float = 0.0
    pp_overlap: float = 0.0
    usable_memory: float = 0.9

    def validate(self) -> "Efficiency":
        check_probability("efficiency.compute", self.compute)
        check_positive("efficiency.compute", self.compute)
        check_probability("efficiency.bandwidth", self.bandwidth)
        check_positive("efficiency.bandwidth", self.bandwidth)
        check_probability("efficiency.usable_memory", self.usable_memory)
        for name in ("tp_overlap", "dp_overlap", "ep_overlap", "pp_overlap"):
            check_probability(f"efficiency.{name}", getattr(self, name))
        return self

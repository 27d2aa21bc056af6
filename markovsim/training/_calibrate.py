r"""Calibrate, then validate: fit named kernel-model constants on measured runs.

:func:`calibrate` fits the chosen :class:`~markovsim.training.KernelModel` constants of one
accelerator by least squares on the log error of each run's reported output,

.. math:: \min_\theta \sum_i \big(\log \hat y_i(\theta) - \log y_i\big)^2 ,

with bounds on every constant (scipy's trust-region reflective ``least_squares``). The
spread reported with each value is its standard error from the Jacobian at the optimum,
:math:`\sqrt{\mathrm{diag}\,(J^\top J)^{-1}\, s^2}` with :math:`s^2` the residual variance
(``nan`` when there are no more runs than constants), and each constant says whether it
ended on a bound (then its spread means little and the fit should be read with care).

A fit converges even where the runs cannot determine a constant: one that no run's
prediction depends on (the FP8 fraction on BF16 runs, the attention fraction on runs
without flash attention) keeps its starting value, and two that act alike (or more
constants than runs) trade off along a line. So each constant also says whether the runs
identify it: the Jacobian at the optimum, each column scaled by the constant's range, must
have full column rank and the constant's own column must not vanish. ``success`` is true
only when the optimiser converged **and** every constant is identified; a value the runs do
not identify is a starting value, not a fit, and the table says so.

Runs come from a case file (:func:`runs_from_cases`, cases with ``role = "fit"``), so the
same file holds the runs a preset is fitted on and the held-out runs it is judged on; a
held-out run is never passed to :func:`calibrate`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .._errors import InvalidParameterError, SpecError
from .._io import parse_quantity
from ._outputs import plan_outputs
from ._hardware import KERNEL_PARAMETERS, KernelModel
from ._spec import PlanSpec, plan_from_document
from ._step import step_time

__all__ = ["Run", "Calibration", "calibrate", "runs_from_cases", "predict", "DEFAULT_BOUNDS", "ROLES",
           "calibrate_cases", "kernels_table"]

#: the roles a case may have (as in :mod:`markovsim.validate`)
ROLES = ("fit", "holdout", "check")

#: bounds of each constant during a fit
DEFAULT_BOUNDS = {
    "gemm_peak_fraction": (0.3, 1.0), "gemm_traffic": (0.0, 20.0), "attention_peak_fraction": (0.1, 1.0),
    "memory_bandwidth_fraction": (0.2, 1.0), "collective_bandwidth_fraction": (0.2, 1.0),
    "step_overhead_s": (0.0, 30.0), "interleave_efficiency": (0.0, 1.0),
    "fp8_gemm_peak_fraction": (0.2, 1.0), "moe_expert_overhead_s": (0.0, 0.01),
}


@dataclasses.dataclass(frozen=True)
class Run:
    """One published run: its plan (with workload, hardware and efficiency), the output
    reported, and the value (SI units; TFLOP/s outputs in units of 1e12 FLOP/s)."""

    name: str
    spec: PlanSpec
    output: str
    value: float
    source: str = ""
    role: str = "fit"


def predict(run: Run, kernels: KernelModel | None = None) -> float:
    """The model's value of ``run.output`` (with ``kernels`` in place of the preset's)."""
    spec = run.spec
    hw = spec.hardware if kernels is None else spec.hardware.replace(kernels=kernels)
    b = step_time(spec.workload, hw, spec.plan, efficiency=spec.efficiency)
    out = plan_outputs(spec, b)
    if run.output not in out:
        raise InvalidParameterError(f"run {run.name!r}: output {run.output!r} is not predicted; expected one of "
                                    f"{', '.join(sorted(out))}")
    return float(out[run.output])


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate`.

    Attributes:
        hardware: the accelerator's name.
        params: the fitted constants' names.
        values: fitted values (same order).
        spread: standard errors (``nan`` when not determined).
        on_bound: whether each value sits on a bound of its range.
        kernels: the full fitted :class:`KernelModel`.
        runs: the runs' names; ``residuals`` their log errors at the optimum.
        success: whether the optimiser reported convergence and the runs identify every
            constant (``identified``).
        identified: whether the runs determine each constant (its column of the scaled
            Jacobian does not vanish and the columns are independent).
        rank: the rank of the scaled Jacobian (the number of independent directions the
            runs see; every constant is identified only when it equals their number).
        sensitivity: per constant, the norm of its scaled Jacobian column (how much the
            runs' log errors move when it crosses its range).
    """

    hardware: str
    params: tuple[str, ...]
    values: tuple[float, ...]
    spread: tuple[float, ...]
    on_bound: tuple[bool, ...]
    kernels: KernelModel
    runs: tuple[str, ...]
    residuals: tuple[float, ...]
    success: bool
    identified: tuple[bool, ...] = ()
    rank: int = 0
    sensitivity: tuple[float, ...] = ()

    @property
    def rms_log_error(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.residuals))))

    def why_not(self, name: str) -> str:
        """Why the runs do not identify the constant ``name`` (empty when they do)."""
        j = self.params.index(name)
        if self.identified[j]:
            return ""
        if self.sensitivity[j] <= _SEEN:
            return "no run's prediction depends on it; the value is the starting one, not a fit"
        return (f"the runs see {self.rank} independent direction{'s' if self.rank != 1 else ''} for "
                f"{len(self.params)} constants; "
                "it trades off against the others")

    def table(self) -> str:
        """The fitted constants and the runs' errors as plain text."""
        lines = [f"{self.hardware}: {len(self.runs)} fit runs, rms log error {self.rms_log_error:.4f}"]
        for n, v, s, b, i in zip(self.params, self.values, self.spread, self.on_bound, self.identified):
            lines.append(f"  {n:32s} {v:10.4g} +- {s:.2g}" + ("  (on a bound)" if b else "")
                         + ("" if i else f"  (NOT identified: {self.why_not(n)})"))
        for n, r in zip(self.runs, self.residuals):
            lines.append(f"  {n:60s} {100 * math.expm1(r):+7.2f} %")
        return "\n".join(lines)


def calibrate(runs: Sequence[Run], params: Sequence[str], *, start: KernelModel | None = None,
              bounds: Mapping[str, tuple[float, float]] | None = None) -> Calibration:
    """Fit the kernel-model constants ``params`` of one accelerator on ``runs``.

    Args:
        runs: measured runs, all on the same hardware (by name).
        params: names from :data:`~markovsim.training.KERNEL_PARAMETERS`.
        start: starting values (default: the hardware preset's kernel model, else the
            :class:`KernelModel` defaults); constants not fitted keep these values.
        bounds: ``{name: (low, high)}`` overriding :data:`DEFAULT_BOUNDS`.

    Returns:
        a :class:`Calibration`.

    Raises:
        InvalidParameterError: no runs, runs on different hardware, an unknown or repeated
            parameter, a run marked ``holdout``.
    """
    runs = list(runs)
    if not runs:
        raise InvalidParameterError("runs: expected at least one measured run")
    names = {r.spec.hardware.name for r in runs}
    if len(names) > 1:
        raise InvalidParameterError(f"runs: one accelerator per fit (kernel constants are per preset); got "
                                    f"{', '.join(sorted(names))}")
    held = [r.name for r in runs if r.role == "holdout"]
    if held:
        raise InvalidParameterError(f"runs: {', '.join(held)} marked holdout: a held-out run is never fitted on")
    params = list(params)
    unknown = [p for p in params if p not in KERNEL_PARAMETERS]
    if unknown or len(set(params)) != len(params) or not params:
        raise InvalidParameterError(f"params={params!r}: expected distinct names from {', '.join(KERNEL_PARAMETERS)}")
    base = start or runs[0].spec.hardware.kernels or KernelModel()
    lim = dict(DEFAULT_BOUNDS)
    lim.update(bounds or {})
    lo = np.array([lim[p][0] for p in params], float)
    hi = np.array([lim[p][1] for p in params], float)
    # an unfitted FP8 fraction (0) starts from the BF16 one, the value it stands for
    start_values = [base.gemm_peak_fraction if p == "fp8_gemm_peak_fraction" and not base.fp8_gemm_peak_fraction
                    else getattr(base, p) for p in params]
    x0 = np.clip(start_values, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    obs = np.array([r.value for r in runs], float)
    if np.any(~np.isfinite(obs)) or np.any(obs <= 0):
        raise InvalidParameterError("runs: every reported value must be positive and finite (log errors)")

    def model(x):
        k = dataclasses.replace(base, **dict(zip(params, map(float, x))))
        return k, np.array([predict(r, k) for r in runs])

    def residual(x):
        return np.log(model(x)[1]) - np.log(obs)

    from scipy.optimize import least_squares  # imported on use: it costs a second at start-up

    fit = least_squares(residual, x0, bounds=(lo, hi), x_scale="jac", diff_step=1e-4)
    kernels, _ = model(fit.x)
    n, p = len(runs), len(params)
    spread = np.full(p, np.nan)
    if n > p:
        s2 = float(np.sum(fit.fun**2)) / (n - p)
        try:
            cov = np.linalg.inv(fit.jac.T @ fit.jac) * s2
            spread = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        except np.linalg.LinAlgError:
            pass
    tol = 1e-6 * (hi - lo)
    on_bound = tuple(bool(v <= a + t or v >= b - t) for v, a, b, t in zip(fit.x, lo, hi, tol))
    scaled = np.asarray(fit.jac, float) * (hi - lo)
    identified, rank = _identified(scaled)
    if rank < p:
        # the spread of the identified constants alone (the others held), where they are
        # independent; a constant the runs do not identify has none
        spread = np.full(p, np.nan)
        keep = np.flatnonzero(identified)
        if n > keep.size > 0 and int(np.linalg.matrix_rank(scaled[:, keep], tol=_SEEN)) == keep.size:
            jk = np.asarray(fit.jac, float)[:, keep]
            s2 = float(np.sum(fit.fun**2)) / (n - keep.size)
            spread[keep] = np.sqrt(np.clip(np.diag(np.linalg.inv(jk.T @ jk) * s2), 0.0, None))
    return Calibration(runs[0].spec.hardware.name, tuple(params), tuple(map(float, fit.x)), tuple(map(float, spread)),
                       on_bound, kernels, tuple(r.name for r in runs), tuple(map(float, fit.fun)),
                       bool(fit.success) and all(identified), identified, rank,
                       tuple(float(x) for x in np.linalg.norm(scaled, axis=0)))


#: a constant moved over its whole range changes no run's log error by more than this: not seen
_SEEN = 1e-6


def _identified(jac: np.ndarray) -> tuple[tuple[bool, ...], int]:
    """Per constant, whether the runs identify it, and the rank of ``jac`` (the Jacobian of
    the log errors, each column scaled by its constant's range). A vanishing column is not
    identified; with independent nonvanishing columns each is; where the nonvanishing ones
    are dependent, a column is flagged when leaving it out does not lower the rank."""
    seen = np.linalg.norm(jac, axis=0) > _SEEN
    if not seen.any():
        return tuple(False for _ in seen), 0
    rank = int(np.linalg.matrix_rank(jac, tol=_SEEN))
    if rank == int(seen.sum()):
        return tuple(bool(x) for x in seen), rank
    flags = []
    for j in range(jac.shape[1]):
        rest = np.delete(jac, j, axis=1)
        flags.append(bool(seen[j]) and int(np.linalg.matrix_rank(rest, tol=_SEEN)) < rank)
    return tuple(flags), rank


#: the keys of a validation case (markovsim.validate) that are not the plan
_META = ("name", "kind", "tolerance", "source", "expect", "role", "linearity", "unpublished")


def _value(value, output: str, where: str) -> float:
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    kind = "time" if output.endswith("_s") else "ratio"
    return parse_quantity(value, kind, where=where)


def runs_from_cases(path: str | Path, *, role: str = "fit") -> list[Run]:
    """The runs of the ``train`` cases with ``role`` in a case file (one run per reported
    output). Cases must be self-contained (no ``model_file``)."""
    if role not in ROLES:
        raise InvalidParameterError(f"role={role!r}: expected one of {', '.join(ROLES)}")
    from .._io import read_document

    path = Path(path)
    data = read_document(path)  # SpecError for a missing, binary or malformed file
    runs = []
    for i, case in enumerate(data.get("case", [])):
        if case.get("kind") != "train" or case.get("role", "check") != role:
            continue
        where = f"{path.name}: case[{i}]"
        if "model_file" in case:
            raise SpecError(f"{where}.model_file: runs_from_cases reads self-contained cases only")
        doc = {k: v for k, v in case.items() if k not in _META}
        spec = plan_from_document(doc, where=where, base=path.parent)
        for output, value in case.get("expect", {}).items():
            if output == "linearity":
                continue
            runs.append(Run(f"{case.get('name', where)} [{output}]", spec, output,
                            _value(value, output, f"{where}.expect.{output}"), case.get("source", ""), role))
    return runs


def calibrate_cases(path: str | Path, params: Sequence[str]) -> list[Calibration]:
    """:func:`calibrate` on the ``fit`` cases of a case file, one fit per accelerator.

    Args:
        path: the case file; its ``train`` cases with ``role = "fit"`` are the runs.
        params: the constants to fit (names from :data:`~markovsim.training.KERNEL_PARAMETERS`).

    Returns:
        one :class:`Calibration` per accelerator that has fit runs, in the order of their
        first fit case.

    Raises:
        InvalidParameterError: no fit case, or a fit the parameters cannot be made on.
    """
    if isinstance(params, (str, bytes)) or not isinstance(params, Sequence) or not all(
            isinstance(p, str) for p in params):
        raise InvalidParameterError(f"params={params!r}: expected a list of names from {', '.join(KERNEL_PARAMETERS)}")
    runs = runs_from_cases(path, role="fit")
    if not runs:
        raise InvalidParameterError(f"{Path(path).name}: [calibrate] needs cases with role = \"fit\" (kind \"train\")")
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.spec.hardware.name, []).append(r)
    return [calibrate(group, params) for group in groups.values()]


def kernels_table(kernels: KernelModel) -> dict:
    """A :class:`KernelModel` as the ``[kernels]`` table of a hardware file (every constant,
    ``step_overhead`` with its unit)."""
    if not isinstance(kernels, KernelModel):
        raise InvalidParameterError(f"kernels={kernels!r}: expected a KernelModel (e.g. Calibration.kernels)")
    out = {}
    for f in dataclasses.fields(KernelModel):
        value = float(getattr(kernels, f.name))
        out["step_overhead" if f.name == "step_overhead_s" else f.name] = (
            f"{value!r} s" if f.name == "step_overhead_s" else value)
    return out

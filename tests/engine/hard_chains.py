"""Hard chains with exactly known stationary distributions (for the certified-solver table).

Each chain comes with the exact natural logarithm of every stationary probability, computed
independently of any solver:

- *reversible chains with power-of-two potentials*: symmetric conductances ``c_ij`` (any
  floats) and integer potentials ``V_i`` give rates ``q_ij = c_ij 2^{min(0, V_i - V_j)}``;
  ``pi_i q_ij = c_ij 2^{-max(V_i, V_j)}`` is symmetric, so ``pi_i = 2^{-V_i} / Z`` exactly
  (scaling by a power of two is exact in float64), with ``Z`` an exact integer sum;
- *birth-death chains with arbitrary float rates*: ``pi_k / pi_0 = prod_{i<k} b_i / d_i``
  (product form), summed in mpmath at 40 digits.

``rel_errors(pi, log_pi, case)`` returns the relative error of every entry whose exact
value is at least 2.2e-308 and checks the others lie below it.
"""

from __future__ import annotations

import dataclasses
import math

import mpmath
import numpy as np
import scipy.sparse as sp

FLOOR = float(np.finfo(float).tiny)
LN2 = mpmath.log(2)


@dataclasses.dataclass(frozen=True)
class HardChain:
    name: str
    Q: sp.csr_matrix
    log_pi: np.ndarray  # exact natural logs, rounded to float64 (error ~1e-16 |log pi|)


def _generator(rows, cols, vals, n) -> sp.csr_matrix:
    R = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    R.sum_duplicates()
    return (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()


def reversible(name, edges_i, edges_j, conductance, V) -> HardChain:
    """Reversible chain on undirected edges (i, j) with pi proportional to 2^-V exactly."""
    V = np.asarray(V, dtype=np.int64)
    n = len(V)
    i, j = np.asarray(edges_i), np.asarray(edges_j)
    c = np.asarray(conductance, dtype=float)
    up = np.ldexp(c, np.minimum(0, V[i] - V[j]).astype(np.int32))  # i -> j
    down = np.ldexp(c, np.minimum(0, V[j] - V[i]).astype(np.int32))  # j -> i
    assert np.all(up > FLOOR) and np.all(down > FLOOR), "rates must stay normal for exactness"
    Q = _generator(np.r_[i, j], np.r_[j, i], np.r_[up, down], n)
    vmin = int(V.min())
    Z = sum(1 << int(v) for v in (int(V.max()) - V))  # exact: sum 2^(Vmax - V_i)
    # log pi_i = -(V_i - vmin) ln 2 - ln(sum 2^(vmin - V_j)) = -(V_i - vmin) ln2 - (ln Z - (Vmax - vmin) ln 2)
    lnZ = mpmath.log(Z) - (int(V.max()) - vmin) * LN2
    log_pi = np.array([float(-(int(v) - vmin) * LN2 - lnZ) for v in V])
    return HardChain(name, Q, log_pi)


def birth_death_exact(name, birth, death) -> HardChain:
    """Birth-death chain: state k -> k+1 at birth[k], k+1 -> k at death[k]."""
    birth = np.asarray(birth, dtype=float)
    death = np.asarray(death, dtype=float)
    n = len(birth) + 1
    k = np.arange(n - 1)
    Q = _generator(np.r_[k, k + 1], np.r_[k + 1, k], np.r_[birth, death], n)
    with mpmath.workdps(40):
        logs = [mpmath.mpf(0)]
        for b, d in zip(birth, death):
            logs.append(logs[-1] + mpmath.log(mpmath.mpf(float(b))) - mpmath.log(mpmath.mpf(float(d))))
        top = max(logs)
        lnZ = top + mpmath.log(mpmath.fsum(mpmath.exp(x - top) for x in logs))
        log_pi = np.array([float(x - lnZ) for x in logs])
    return HardChain(name, Q, log_pi)


def rel_errors(pi, case: HardChain) -> tuple[float, int]:
    """(max relative error over entries with exact value >= FLOOR, number of entries below
    FLOOR that were returned at or above it). Computed as |expm1(log pi_hat - log pi)|,
    exact to ~1e-16 |log pi| (1e-12 at 1e-1607)."""
    pi = np.asarray(pi, dtype=float)
    big = case.log_pi >= math.log(FLOOR)
    with np.errstate(divide="ignore"):
        err = np.abs(np.expm1(np.log(pi[big]) - case.log_pi[big]))
    err = np.where(np.isfinite(err), err, np.inf)
    return float(err.max(initial=0.0)), int(np.count_nonzero(pi[~big] >= FLOOR))


# ----------------------------------------------------------------------------- the table


def nearly_decomposable(n: int = 1200, blocks: int = 2, coupling: float = 1e-15, seed: int = 0) -> HardChain:
    """``blocks`` blocks of random sparse O(1) conductances (a ring plus random chords
    within each block), consecutive blocks joined by one edge of conductance ``coupling``;
    potentials spread the mass over ~2^20 within each block and 2^40 between blocks."""
    rng = np.random.default_rng(seed)
    size = n // blocks
    ii, jj, cc = [], [], []
    for b in range(blocks):
        lo = b * size
        idx = np.arange(size)
        ii.append(lo + idx)
        jj.append(lo + (idx + 1) % size)
        cc.append(10 ** rng.uniform(-1, 1, size))
        a = rng.integers(0, size, 2 * size)
        d = rng.integers(1, 6, 2 * size)
        ii.append(lo + a)
        jj.append(lo + (a + d) % size)
        cc.append(10 ** rng.uniform(-1, 1, 2 * size))
        if b + 1 < blocks:
            ii.append(np.array([lo + size - 1]))
            jj.append(np.array([lo + size]))
            cc.append(np.array([coupling]))
    V = np.concatenate([rng.integers(0, 20, size) + 40 * b for b in range(blocks)])
    return reversible(f"nearly decomposable, {n} states, coupling {coupling:g}",
                      np.concatenate(ii), np.concatenate(jj), np.concatenate(cc), V)


def random_birth_death(n: int = 10_000, seed: int = 1, decades: tuple = (-9, 3)) -> HardChain:
    """Birth-death chain with rates log-uniform over ``decades`` (per second)."""
    rng = np.random.default_rng(seed)
    birth = 10 ** rng.uniform(*decades, n - 1)
    death = 10 ** rng.uniform(*decades, n - 1)
    return birth_death_exact(f"birth-death, {n} states, random rates 1e{decades[0]}..1e{decades[1]}", birth, death)


def two_well(half: int = 600, barrier_log2: int = 1400, asymmetry_log2: int = 0) -> HardChain:
    """A birth-death double well on 2 half + 1 states: potential rising linearly from each
    end to a barrier of 2^barrier_log2 in the middle (1e-421 at 1400), the right well
    deeper by 2^asymmetry_log2. Exact through power-of-two potentials."""
    x = np.arange(2 * half + 1)
    V = np.round(barrier_log2 * (1 - np.abs(x - half) / half)).astype(np.int64)
    V[half + 1:] -= np.round(asymmetry_log2 * (x[half + 1:] - half) / half).astype(np.int64)
    V -= V.min()
    i = x[:-1]
    rng = np.random.default_rng(half)
    return reversible(f"two wells, {2 * half + 1} states, barrier 2^-{barrier_log2}"
                      + (f", asymmetry 2^{asymmetry_log2}" if asymmetry_log2 else ""),
                      i, i + 1, 10 ** rng.uniform(-1, 1, len(i)), V)


def random_local(n: int = 100_000, reach: int = 12, degree: int = 4, seed: int = 2,
                 slope_log2: int = 0, step_log2: int = 30) -> HardChain:
    """A random sparse reversible chain: a path plus ``degree`` random chords per state to
    states at most ``reach`` away, conductances log-uniform 1e-3..1e3, random integer
    potentials (steps of up to 2^±step_log2, drifting by slope_log2 per state)."""
    rng = np.random.default_rng(seed)
    i = np.r_[np.arange(n - 1), np.repeat(np.arange(n), degree)]
    j = np.r_[np.arange(1, n), np.repeat(np.arange(n), degree) + rng.integers(1, reach + 1, n * degree)]
    keep = j < n
    i, j = i[keep], j[keep]
    V = np.cumsum(rng.integers(-step_log2, step_log2 + 1, n) + slope_log2)
    V -= V.min()
    return reversible(f"random sparse reversible, {n} states, reach {reach}", i, j,
                      10 ** rng.uniform(-3, 3, len(i)), V)


def random_graph(n: int = 10_000, degree: int = 3, seed: int = 3, spread_log2: int = 8) -> HardChain:
    """A random sparse reversible chain with long-range edges (a ring plus random chords
    anywhere): no narrow band exists, so only the uncertified LU/GMRES paths apply."""
    rng = np.random.default_rng(seed)
    i = np.r_[np.arange(n), rng.integers(0, n, n * degree)]
    j = np.r_[(np.arange(n) + 1) % n, rng.integers(0, n, n * degree)]
    keep = i != j
    V = rng.integers(0, spread_log2 + 1, n)
    return reversible(f"random graph, {n} states", i[keep], j[keep], 10 ** rng.uniform(-1, 1, int(keep.sum())), V)

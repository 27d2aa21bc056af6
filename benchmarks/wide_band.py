"""Wide-band sparse chains: markovsim's certified blocked GTH against sparse LU and GMRES.

Three chains whose band, after reverse Cuthill-McKee, is too wide for the sliding-window
banded GTH (``w >= 256``):

1. **The CloudMatrix384 decode fleet** (``models/inference/deepseek_v3_cloudmatrix384.toml``:
   8 instances of 160 NPUs, 16 spare cards, 12 instance states, at most 3 recovering):
   21,671 states, bandwidth 1,320; and (3.) the same fleet with 12 instances, 38,765
   states, bandwidth 1,711 (``n w^2 = 1.1e11``; its envelope work, 7.4e10, is what admits it
   to the blocked solver), against markovsim's other two paths only. No independent exact answer exists; each answer's
   largest relative difference from markovsim's certified one (whose proven bound is
   printed) is reported over the probabilities >= 1e-300, and its normalised residual.
2. **A reversible chain with an exact answer**: 20,000 states on a path plus four random
   chords per state to states at most 300 away, conductances log-uniform in 1e-3..1e3,
   integer potentials ``V`` (random steps of up to 2^±6), rates
   ``q_ij = c_ij 2^min(0, V_i - V_j)``, so ``pi_i = 2^-V_i / Z`` exactly (probabilities
   down to about 2^-700, inside the float64 range so that every method can be right).

Methods, each in this process, timed as the median of three runs after one untimed run (a
method whose first run takes over 10 s: that run):
markovsim's default (``SparseDirect``: certified blocked banded GTH here);
``SparseIterative`` (GMRES with an incomplete-LU preconditioner, never certified); scipy
``spsolve`` with the last balance equation replaced by a row of ones (the usual recipe);
scipy ``splu`` (SuperLU, COLAMD) of the same system, factor and solve; and markovsim's
pinned LU (``markovsim.engine._pinned``: the generator with one balance equation pinned,
no dense row), what the default ran on these chains before the blocked solver
(``UNCERTIFIED``).

Usage: ``.venv/bin/python benchmarks/wide_band.py`` (about 11 minutes on 2 cores, most of
it the two scipy peers, whose row of ones fills the LU factors).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from _timing import median_time

ROOT = Path(__file__).resolve().parent.parent


def fleet_generator(instances: int | None = None) -> sp.csr_matrix:
    import dataclasses

    from markovsim import inference as inf
    from markovsim.engine._pinned import sparse_generator
    from markovsim.inference._fleet import fleet_chain

    m = inf.load_inference_model(ROOT / "models" / "inference" / "deepseek_v3_cloudmatrix384.toml")
    decode = m.decode if instances is None else dataclasses.replace(m.decode, instances=instances)
    return sparse_generator(fleet_chain(decode, m.tiers).chain).tocsr()


def reversible_generator(n=20_000, reach=300, degree=4, step=6, seed=8):
    """(Q, exact log pi) of the reversible chain described in the module docstring."""
    rng = np.random.default_rng(seed)
    i = np.r_[np.arange(n - 1), np.repeat(np.arange(n), degree)]
    j = np.r_[np.arange(1, n), np.repeat(np.arange(n), degree) + rng.integers(1, reach + 1, n * degree)]
    keep = j < n
    i, j = i[keep], j[keep]
    V = np.cumsum(rng.integers(-step, step + 1, n))
    V -= V.min()
    c = 10 ** rng.uniform(-3, 3, len(i))
    up = np.ldexp(c, np.minimum(0, V[i] - V[j]).astype(np.int32))
    down = np.ldexp(c, np.minimum(0, V[j] - V[i]).astype(np.int32))
    R = sp.csr_matrix((np.r_[up, down], (np.r_[i, j], np.r_[j, i])), shape=(n, n))
    R.sum_duplicates()
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    # pi_i = 2^(vmax - V_i) / Z with the integer Z = sum_j 2^(vmax - V_j); math.log takes big ints
    vmax = int(V.max())
    Z = sum(1 << (vmax - int(v)) for v in V)
    return Q, (vmax - V) * math.log(2) - math.log(Z)


def pinned_system(Q):
    n = Q.shape[0]
    A = sp.vstack([Q.T.tocsr()[:-1], sp.csr_matrix(np.ones((1, n)))]).tocsc()
    b = np.zeros(n)
    b[-1] = 1.0
    return A, b


def residual(Q, pi):
    absQ = abs(Q)
    return float(np.abs(pi @ Q).sum() / max(float(np.abs(pi) @ absQ @ np.ones(Q.shape[0])), 1e-300))


def methods(Q, scipy_peers=True):
    import markovsim as ms

    A, b = pinned_system(Q)
    from markovsim.engine._pinned import pinned_stationary

    out = {
        "markovsim default (SparseDirect)": lambda: ms.solve_stationary(ms.CTMC(Q)),
        "markovsim pinned LU (the default before)": lambda: pinned_stationary(Q)[0],
        "markovsim SparseIterative (GMRES)": lambda: ms.solve_stationary(ms.CTMC(Q), method=ms.SparseIterative()),
    }
    if scipy_peers:
        out["scipy spsolve, row of ones"] = lambda: spla.spsolve(A, b)
        out["scipy splu (SuperLU, COLAMD), row of ones"] = lambda: spla.splu(A, permc_spec="COLAMD").solve(b)
    return out


def run(title, Q, exact_log_pi=None, scipy_peers=True):
    from markovsim.engine._gth_host import band_order

    _, w = band_order(Q)
    print(f"\n{title}: {Q.shape[0]:,} states, {Q.nnz:,} nonzeros, bandwidth {w:,} (RCM)")
    rows, answers = [], {}
    for name, fn in methods(Q, scipy_peers).items():
        t0 = time.perf_counter()
        out = fn()
        first = time.perf_counter() - t0
        # a method slower than 10 s is timed once (its first run)
        t, how = (median_time(fn, 3), "median of 3") if first < 10 else (first, "one run")
        pi = np.asarray(out.pi if hasattr(out, "pi") else out, dtype=float)
        note = f"{out.status.name}, bound {out.error_bound:.1e}, {out.method}" if hasattr(out, "status") else ""
        answers[name] = (t, pi, f"{how}; {note}" if note else how)
        print(f"  ... {name}: {t:.2f} s", flush=True)
    base_t, base_pi, _ = answers["markovsim default (SparseDirect)"]
    if exact_log_pi is not None:
        ref, what = np.exp(exact_log_pi), "max rel err vs exact"
    else:
        ref, what = base_pi, "max rel diff vs markovsim's certified answer"
    big = ref >= 1e-300
    for name, (t, pi, note) in answers.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = float(np.max(np.abs(pi[big] / ref[big] - 1.0))) if np.isfinite(pi).all() else float("nan")
        absdiff = float(np.max(np.abs(pi - ref)))
        rows.append((name, f"{t:.2f} s", f"{t / base_t:.2f}", f"{rel:.1e}", f"{absdiff:.1e}", f"{residual(Q, pi):.1e}",
                     note))
    header = ("method", "time", "ratio", what, "max abs", "residual", "note")
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in range(len(header))]
    for r in [header] + rows:
        print("  " + "  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)))
    print("  ratio = time / markovsim default; relative errors over probabilities >= 1e-300; "
          "residual = |pi Q|_1 / (|pi| |Q| 1)")


def main():
    sys.path.insert(0, str(ROOT))
    import jax

    import markovsim  # noqa: F401  (float64)

    print(f"wide-band benchmark: jax {jax.__version__}, numpy {np.__version__}, {os.cpu_count()} CPU cores")
    t0 = time.perf_counter()
    run("1. CloudMatrix384 decode fleet", fleet_generator())
    Q, log_pi = reversible_generator()
    run("2. Reversible chain, exact answer", Q, log_pi)
    run("3. The same fleet with 12 decode instances (scipy's row-of-ones peers left out: "
        "2 minutes each at 21,671 states)", fleet_generator(12), scipy_peers=False)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

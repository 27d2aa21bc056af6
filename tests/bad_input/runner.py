"""Run one campaign call under a time budget and classify what came back.

Outcomes: ``named`` (a :class:`markovsim.MarkovsimError`), ``accepted`` (a return value,
which the caller then checks), ``raw`` (any other exception), ``hang`` (the time budget ran
out), ``oom`` (:class:`MemoryError`). Budgets use ``signal.alarm`` (main thread, POSIX).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import signal
import traceback
import warnings
from typing import Any, Callable

from markovsim import MarkovsimError

#: seconds one call may take before it counts as a hang
BUDGET_S = 20


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


@dataclasses.dataclass
class Outcome:
    label: str
    kind: str  # named | accepted | raw | hang | oom
    detail: str = ""
    value: Any = None

    def __str__(self):
        return f"{self.label}: {self.kind}: {self.detail}"[:600]


def _alarm(signum, frame):
    raise _Hang()


def call(label: str, fn: Callable[[], Any], *, budget_s: int = BUDGET_S) -> Outcome:
    """``fn()`` under ``budget_s`` seconds, warnings ignored, classified."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(budget_s)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn()
        signal.alarm(0)
        return Outcome(label, "accepted", value=value)
    except _Hang:
        return Outcome(label, "hang", f"no answer within {budget_s} s")
    except MemoryError as exc:
        return Outcome(label, "oom", repr(exc))
    except MarkovsimError as exc:
        return Outcome(label, "named", str(exc))
    except Exception as exc:  # the campaign's finding: a raw Python exception
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome(label, "raw", f"{type(exc).__name__}: {exc} (at {tb.filename}:{tb.lineno})")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cli(label: str, argv: list[str], *, budget_s: int = BUDGET_S) -> Outcome:
    """``markovsim argv`` in-process: ``named`` for a clean error (exit != 0, one line, no
    traceback), ``accepted`` (value: the JSON text) for exit 0, else ``raw``."""
    from markovsim._cli import main

    out, err = io.StringIO(), io.StringIO()

    def run():
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                return main(argv)
            except SystemExit as exc:  # argparse usage errors
                return exc.code

    res = call(label, run, budget_s=budget_s)
    if res.kind != "accepted":
        return res
    rc, text = res.value, err.getvalue()
    if "Traceback" in text or "Traceback" in out.getvalue():
        return Outcome(label, "raw", f"traceback printed, exit {rc}: {text[-400:]}")
    if rc in (0, None):
        return Outcome(label, "accepted", value=out.getvalue())
    if not text.strip():
        return Outcome(label, "raw", f"exit {rc} with no message")
    return Outcome(label, "named", f"exit {rc}: {text.strip().splitlines()[-1]}")


def bad_numbers(obj: Any, path: str = "") -> list[str]:
    """Paths of NaN/inf numbers (and JSON nulls standing for them) inside a result."""
    found: list[str] = []
    if isinstance(obj, bool) or obj is None:
        return found
    if isinstance(obj, (int, float)):
        if isinstance(obj, float) and not math.isfinite(obj):
            found.append(f"{path}={obj}")
        return found
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += bad_numbers(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found += bad_numbers(v, f"{path}[{i}]")
    return found

"""Checks at the public entry points: every function in a public package's ``__all__`` is
wrapped (:func:`guard_public`) so that its arguments are checked before it runs.

* An argument whose parameter is annotated with (or, unannotated, conventionally named
  after) a markovsim class must be an instance of it: else :class:`InvalidTypeError`
  naming the parameter, the value and the class expected.
* A numeric argument whose parameter name has one meaning across the API (``save_time``:
  seconds >= 0, ``cards``: an integer >= 1, ``level``: strictly between 0 and 1, ...; table
  :data:`NUMBERS`) must be a finite real number in that domain, and an integer argument
  must not exceed :data:`MAX_COUNT` (sizes beyond it could never be allocated): else
  :class:`InvalidParameterError`.

JAX tracers pass unchecked (their functions return a status or NaN under ``jit``), so the
wrappers work inside ``jit``, ``grad`` and ``vmap``. The functions' own checks stay: these
add the type and range checks that a wrong *kind* of value (a string, ``None``, a complex
number, ``2**200``) would otherwise fail deep inside with a raw Python exception.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from typing import Any, Callable, Mapping

import numpy as np

from ._errors import InvalidParameterError, InvalidTypeError, _is_traced, check_integer, check_number

#: the largest count (replicas, events, cards, nodes, draws) any function accepts: 2**31 - 1,
#: the int32 bound of JAX's default integer arrays
MAX_COUNT = 2**31 - 1

_T, _POS, _INT, _INT0, _P, _NUM, _NN = "time", "positive", "integer", "integer0", "probability", "number", "nonnegative"
_SIZE, _TP, _W, _LEVEL = "size", "positive time", "lambertw argument", "interval level"
#: the longest time any function accepts, seconds (about 32 million years): beyond it the
#: closed forms overflow float64 or a simulation could never finish
MAX_TIME = 1e15
#: parameter name -> domain, where the name means the same thing across the public API
NUMBERS: dict[str, str] = {
    # times, seconds
    "save_time": _T, "restart_time": _T, "downtime": _T, "mtbf": _TP, "interval": _TP,
    "t_end": _T, "step_time_s": _T, "latency_s": _T, "horizon": _TP, "duration": _TP, "window": _T,
    "days": _SIZE, "nodes": _SIZE, "job_nodes": _SIZE, "reported": _POS,
    # rates, sizes, throughputs
    "rates": _POS, "bandwidth_bytes_per_s": _POS, "size_bytes": _NN, "throughput": _NN, "base_throughput": _POS,
    "demand_tokens_per_s": _POS, "card_fault_rate": _NN, "exposure": _POS, "ratio": _POS,
    "counts": _NN, "durations": _NN, "zipf_exponent": _NN, "work_cv": _NN, "jitter_cv": _NN,
    "imbalance_before": _POS, "imbalance_after": _POS, "factor": _POS,
    # shares and probabilities
    "availability": _P, "level": _LEVEL, "goodput": _P, "probabilities": _P, "continue_probabilities": _P,
    "moe_share": _P, "exposed_share": _P, "hidden_fraction": _P, "soft_fault_share": _P, "zero_mass": _P,
    "step_cut": _P, "exposed_cut": _P, "target": _P, "availability_low": _P,
    # counts
    "cards": _INT, "base_cards": _INT, "ranks": _INT, "pp": _INT, "micro_batches": _INT, "virtual_stages": _INT,
    "phases": _INT, "replicas": _INT, "max_events": _INT, "steps": _INT0, "endpoints": _INT, "radix": _INT,
    "experts": _INT, "devices": _INT, "count": _INT0, "global_batch": _INT, "draws": _INT, "simulations": _INT,
    "runs": _INT, "classes": _INT, "iterations": _INT, "starts": _INT, "n_classes": _INT, "events": _INT,
    "max_recovering": _INT0, "chunk_size": _INT, "max_tp": _INT, "max_pp": _INT, "ranks_per_node": _INT,
    "max_phases": _INT, "repair_min_per_class": _INT, "rate_classes": _INT, "warmup": _INT0,
    "n": _NUM, "z": _NUM, "x": _NUM, "seed": _INT0, "rate": _NN, "work": _TP,
    "absorbing": _NUM, "targets": _NUM,
}
#: the same for names whose meaning depends on the package: (package, name) -> (check, domain)
NUMBERS_IN: dict[tuple[str, str], tuple[str, Any]] = {("markovsim.training", "work"): ("array", _NN),
                                                   ("markovsim.training", "runs"): ("sequence", None)}
#: annotation names that are not markovsim classes
_GENERIC = frozenset({"Any", "Sequence", "Mapping", "Callable", "Path", "Iterable", "ArrayLike", "Array"})
#: unannotated parameters conventionally named after a class: name -> class name
OBJECTS: dict[str, str] = {"catalogue": "FaultCatalogue", "shape": "ClusterShape", "workload": "Workload",
                           "hardware": "Hardware"}
#: the same for names whose class depends on the package: (package, name) -> class name
OBJECTS_IN: dict[tuple[str, str], str] = {("markovsim.training", "plan"): "Plan"}
#: parameters that take one of an enumeration's members or values: name -> enumeration
ENUMS: dict[str, str] = {"kind": "Collective", "schedule": "Schedule", "algorithm": "Algorithm",
                         "scaling": "Scaling", "recompute": "Recompute", "convention": "FlopConvention",
                         "effect": "Effect", "form": "PhaseForm", "reach": "Reach"}
#: parameters that take an array of at least one dimension
ARRAYS = frozenset({"durations", "censored", "counts", "probabilities", "rates", "continue_probabilities",
                    "times", "p0", "sizes"})
#: parameters that name a file a function reads (it must exist)
READ_PATHS = frozenset({"path", "name_or_path"})
#: parameters that take a square matrix (dense or scipy.sparse)
MATRICES = frozenset({"Q", "P"})


#: public classes by name, registered by each package's :func:`guard_public` (this module
#: imports no domain package: the domains import it)
_CLASSES: dict[str, type] = {}


def _classes() -> dict[str, type]:
    return _CLASSES


def _annotation_name(annotation: Any) -> str | None:
    """The one class name an annotation gives (``"Fleet"``, ``"Fleet | None"``), else None."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, type):
        return annotation.__name__
    if not isinstance(annotation, str):
        return None
    names = [p.strip() for p in annotation.split("|") if p.strip() != "None"]
    return names[0] if len(names) == 1 and names[0].isidentifier() else None


def _check_value(fname: str, pname: str, value: Any, domain: str) -> None:
    if _is_traced(value) or isinstance(value, (bool, np.bool_)):
        return
    label = f"{fname}: {pname}"
    if value is None:
        raise InvalidParameterError(f"{label}=None: expected a number")
    if isinstance(value, int) and domain not in (_INT, _INT0) and abs(value) > 2**63 - 1:
        raise InvalidParameterError(f"{label}={value}: an integer beyond 64 bits; expected a number of at most "
                                    f"{2**63 - 1} (write a larger value as a float)")
    if domain in (_INT, _INT0):
        if isinstance(value, (list, tuple, np.ndarray)):
            arr = np.asarray(check_number(label, value))
            low = 1 if domain == _INT else 0
            if arr.size and ((arr > MAX_COUNT).any() or (arr < low).any() or (arr != np.round(arr)).any()):
                raise InvalidParameterError(f"{label}={value!r:.60}: expected integers from {low} to {MAX_COUNT}")
            return
        if isinstance(value, (float, np.floating)) and np.isfinite(value) and not float(value).is_integer():
            raise InvalidParameterError(f"{label}={value!r}: expected an integer (whole {pname})")
        check_integer(label, value, minimum=1 if domain == _INT else 0, maximum=MAX_COUNT)
        return
    if isinstance(value, (str, bytes, complex)) or (isinstance(value, numbers.Number) and not isinstance(
            value, numbers.Real)):
        check_number(label, value)  # raises, naming the value
    if isinstance(value, (numbers.Real, list, tuple, np.ndarray, np.generic)):
        if domain == _T:
            check_number(label, value, minimum=0.0, maximum=MAX_TIME, unit="s")
        elif domain == _TP:
            check_number(label, value, positive=True, maximum=MAX_TIME, unit="s")
        elif domain == _SIZE:
            check_number(label, value, positive=True, maximum=float(MAX_COUNT))
        elif domain == _W:
            check_number(label, value, minimum=-float(np.exp(-1.0)))
        elif domain == _POS:
            check_number(label, value, positive=True)
        elif domain == _NN:
            check_number(label, value, minimum=0.0)
        elif domain == _P:
            check_number(label, value, minimum=0.0, maximum=1.0)
        elif domain == _LEVEL:  # 0 and 1 give a point or an unbounded interval, never what was meant
            check_number(label, value, minimum=0.0, maximum=1.0)
            if not np.all((np.asarray(value, dtype=float) > 0.0) & (np.asarray(value, dtype=float) < 1.0)):
                raise InvalidParameterError(f"{label}={value!r:.60}: expected an interval level strictly between "
                                            "0 and 1 (e.g. 0.9)")
        else:
            check_number(label, value)


def _check_enum(fname: str, pname: str, value: Any, enum_name: str) -> None:
    cls = _classes().get(enum_name)
    if cls is None or isinstance(value, cls):
        return
    allowed = [m.value for m in cls]
    if isinstance(value, str) and value in allowed:
        return
    raise InvalidParameterError(f"{fname}: {pname}={value!r:.60}: expected one of "
                                f"{', '.join(map(repr, allowed))} (markovsim {enum_name})")


def _check_matrix(fname: str, pname: str, value: Any) -> None:
    import scipy.sparse as sp

    if sp.issparse(value):
        shape = value.shape
    else:
        arr = check_number(f"{fname}: {pname}", value)
        shape = np.shape(arr)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise InvalidParameterError(f"{fname}: {pname}: expected a square matrix, got shape {tuple(shape)}")


def _check_path(fname: str, pname: str, value: Any, *, presets: bool) -> None:
    import os

    if not isinstance(value, (str, os.PathLike)):
        raise InvalidTypeError(f"{fname}: {pname}={value!r:.60}: expected a file name (str or Path), "
                               f"got {type(value).__name__}")
    text = os.fspath(value)
    if not text or "\x00" in text:
        raise InvalidParameterError(f"{fname}: {pname}={value!r:.60}: expected a file name")
    # a path must exist; for readers of presets, a bare name is a shipped preset, which the
    # reader itself resolves (and names when it is not one)
    bare = os.sep not in text and "." not in os.path.basename(text)
    if not (presets and bare) and not os.path.exists(text):
        from ._errors import SpecError

        raise SpecError(f"{fname}: {pname}={text!r}: file not found")


def _check_key(fname: str, pname: str, value: Any) -> None:
    import jax

    dtype = getattr(value, "dtype", None)
    ok = dtype is not None and (jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
                                or (np.dtype(dtype) == np.uint32 and np.shape(value)[-1:] in ((2,), (4,))))
    if not ok:
        raise InvalidTypeError(f"{fname}: {pname}: expected a JAX PRNG key (jax.random.key(seed) or "
                               f"jax.random.PRNGKey(seed)), got {value!r:.60}")


def guard(fn: Callable, name: str | None = None) -> Callable:
    """``fn`` with its arguments checked (see the module documentation)."""
    if getattr(fn, "__markovsim_guarded__", False):
        return fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    name = name or fn.__name__
    checks: dict[str, tuple[str, Any]] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        cls = _annotation_name(p.annotation)
        if cls in _GENERIC:
            cls = None
        package = ".".join((fn.__module__ or "").split(".")[:2])
        if (package, p.name) in NUMBERS_IN:
            kind, domain = NUMBERS_IN[(package, p.name)]
            checks[p.name] = (kind, domain, p.default is None)
            continue
        if cls is None and p.annotation is inspect.Parameter.empty:
            cls = OBJECTS_IN.get((package, p.name), OBJECTS.get(p.name))
        optional = p.default is None or (isinstance(p.annotation, str) and "None" in p.annotation)
        text = p.annotation if isinstance(p.annotation, str) else ""
        if p.name == "key":
            checks[p.name] = ("key", None)
        elif p.name == "doc" or text.startswith(("dict[", "Mapping[", "dict |", "Mapping |")) or text in (
                "dict", "Mapping"):
            checks[p.name] = ("mapping", None, optional)
        elif p.name in READ_PATHS:
            checks[p.name] = ("path", name.startswith("load_") or name == "validate_cases")
        elif text.startswith(("Sequence[", "list[", "tuple[")) and p.name not in NUMBERS and p.name not in ARRAYS:
            checks[p.name] = ("sequence", None, optional)
        elif p.name in ENUMS and (cls is None or cls == ENUMS[p.name]):
            checks[p.name] = ("enum", ENUMS[p.name])
        elif cls is not None and cls[:1].isupper():
            checks[p.name] = ("class", cls, optional)
        elif p.name in MATRICES:
            checks[p.name] = ("matrix", None)
        elif p.name in ARRAYS:
            checks[p.name] = ("array", NUMBERS.get(p.name, _NUM), optional)
        elif p.name in NUMBERS:
            checks[p.name] = ("number", NUMBERS[p.name], optional)
    if not checks:
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # a call Python itself refuses: its own message
        for pname, value in bound.arguments.items():
            how = checks.get(pname)
            if how is None:
                continue
            if _is_traced(value):
                continue
            if how[0] == "class":
                cls = _classes().get(how[1])
                if cls is not None and not isinstance(value, cls) and not (value is None and how[2]):
                    raise InvalidTypeError(f"{name}: {pname}={value!r:.60}: expected a {cls.__name__}, "
                                           f"got {type(value).__name__}")
            elif how[0] == "enum":
                _check_enum(name, pname, value, how[1])
            elif how[0] == "matrix":
                _check_matrix(name, pname, value)
            elif how[0] == "array":
                if value is None and how[2]:
                    continue
                if np.ndim(value) < 1 or isinstance(value, (str, bytes)):
                    raise InvalidParameterError(f"{name}: {pname}={value!r:.60}: expected an array of numbers "
                                                f"(one entry per item), got {type(value).__name__}")
                _check_value(name, pname, value, how[1])
            elif how[0] == "key":
                _check_key(name, pname, value)
            elif how[0] == "mapping":
                if not (value is None and how[2]) and not isinstance(value, Mapping):
                    raise InvalidTypeError(f"{name}: {pname}={value!r:.60}: expected a table (dict), "
                                           f"got {type(value).__name__}")
            elif how[0] == "sequence":
                if not (value is None and how[2]) and not isinstance(value, (list, tuple)):
                    raise InvalidTypeError(f"{name}: {pname}={value!r:.60}: expected a list, "
                                           f"got {type(value).__name__}")
            elif how[0] == "path":
                _check_path(name, pname, value, presets=how[1])
            else:
                if value is None and how[2]:
                    continue
                _check_value(name, pname, value, how[1])
        return fn(*args, **kwargs)

    checked.__markovsim_guarded__ = True
    return checked


def guard_public(namespace: dict, names) -> None:
    """Replace every public function among ``names`` in ``namespace`` (a package's
    ``globals()``) by its checked version."""
    for n in names:
        obj = namespace.get(n)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            _CLASSES.setdefault(n, obj)
    for n in names:
        obj = namespace.get(n)
        if callable(obj) and not inspect.isclass(obj):
            namespace[n] = guard(obj, n)

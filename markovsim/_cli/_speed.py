"""What the CLI does about compile time: the persistent compilation cache, a one-line
"compiling ..." note on stderr when JAX compiles for more than a second, and whether
progress bars are shown (stderr is a terminal and ``--quiet`` is not given)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from contextlib import contextmanager

from .._compile_cache import ENV_OFF, cli_cache

#: JAX logs "Compiling <name> ..." (DEBUG) on the first logger before it lowers and compiles a
#: program, and "Finished XLA compilation ..." on the second when the program is ready
#: (compiled or read from the persistent cache)
_JAX_LOGGERS = ("jax._src.interpreters.pxla", "jax._src.dispatch")
#: seconds of compiling before the note is printed
NOTE_AFTER_S = 1.0


def add_options(p: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--no-compile-cache`` (every command has them)."""
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars and no 'compiling' note on stderr (they are shown only on a terminal)")
    p.add_argument("--no-compile-cache", action="store_true",
                   help=f"do not keep JAX's compiled programs on disk for later runs (also: {ENV_OFF}=1); "
                        "the cache lives in ~/.cache/markovsim/jax or $MARKOVSIM_COMPILE_CACHE_DIR")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars on stderr: only on a terminal, and not with ``--quiet``."""
    return not getattr(args, "quiet", False) and _stderr_is_tty()


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _CompileWatch(logging.Handler):
    """Follows JAX's compiles from its log records; a watcher thread prints the note once
    while a compile is in flight and compiling has taken :data:`NOTE_AFTER_S` in all."""

    def __init__(self, command: str, cached: bool):
        super().__init__(logging.DEBUG)
        self.command, self.cached = command, cached
        self.started = None  # when the compile in flight started (None: none in flight)
        self.spent = 0.0  # seconds of finished compiles
        self.done = threading.Event()
        self.thread = None

    def emit(self, record: logging.LogRecord) -> None:
        text = str(record.msg)
        now = time.monotonic()
        if text.startswith("Compiling"):
            if self.started is None:
                self.started = now
            if self.thread is None:
                self.thread = threading.Thread(target=self._watch, daemon=True)
                self.thread.start()
        elif text.startswith("Finished XLA compilation") and self.started is not None:
            self.spent += now - self.started
            self.started = None

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            started = self.started
            if started is not None and self.spent + time.monotonic() - started >= NOTE_AFTER_S:
                where = "; kept for later runs" if self.cached else ""
                print(f"markovsim {self.command}: compiling with JAX (first run of this model's shape{where}) ...",
                      file=sys.stderr, flush=True)
                return


@contextmanager
def compile_support(args: argparse.Namespace, *, command_line: bool):
    """Around a command: the persistent cache (only for a real command line, ``argv`` not
    given, so that tests calling ``main([...])`` leave the user's cache alone) and the note."""
    cached = bool(command_line and cli_cache(getattr(args, "no_compile_cache", False)))
    if getattr(args, "quiet", False) or not _stderr_is_tty():
        yield
        return
    watch = _CompileWatch(args.command, cached)
    saved = []
    for name in _JAX_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(watch)
        if not logger.isEnabledFor(logging.DEBUG):  # only our handler sees the records we enable
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
    try:
        yield
    finally:
        watch.done.set()
        for logger, level, propagate in saved:
            logger.removeHandler(watch)
            logger.setLevel(level)
            logger.propagate = propagate


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress_bar(args: argparse.Namespace, total: int, unit: str, desc: str | None = None):
    """A tqdm bar on stderr when :func:`show_progress` allows it (else one that does
    nothing); use as a context manager, ``bar.update()`` per item."""
    if not show_progress(args) or getattr(args, "json", False):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, desc=desc or getattr(args, "command", None), file=sys.stderr,
                dynamic_ncols=True, leave=False)


@contextmanager
def progress_callback(args: argparse.Namespace, unit: str, desc: str | None = None):
    """A ``progress(done, total)`` callback for library loops (``run_reproductions``,
    ``validate_cases``) that draws a :func:`progress_bar`, made at the first call (when the
    total is known) and closed at the end."""
    state: dict = {"done": 0}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"] = progress_bar(args, total, unit, desc)
        state["bar"].update(done - state["done"])
        state["done"] = done

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].close()

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

#: JAX logs "Compiling <name> ..." (at DEBUG) on this logger before every lowering and compile
_JAX_LOGGER = "jax._src.interpreters.pxla"
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
    """Notes JAX's compiles; a watcher thread prints the note once compiling has gone on
    for :data:`NOTE_AFTER_S` (a compile is seen in flight that long after the first)."""

    def __init__(self, command: str, cached: bool):
        super().__init__(logging.DEBUG)
        self.command, self.cached = command, cached
        self.first = self.last = None
        self.done = threading.Event()
        self.thread = None

    def emit(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith("Compiling"):
            return
        now = time.monotonic()
        self.last = now
        if self.first is None:
            self.first = now
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.1):
            now = time.monotonic()
            if now - self.first >= NOTE_AFTER_S and now - self.last < 0.5:
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
    logger = logging.getLogger(_JAX_LOGGER)
    watch = _CompileWatch(args.command, cached)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(watch)
    if not logger.isEnabledFor(logging.DEBUG):  # only our handler sees the records we enable
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    try:
        yield
    finally:
        watch.done.set()
        logger.removeHandler(watch)
        logger.setLevel(old_level)
        logger.propagate = old_propagate

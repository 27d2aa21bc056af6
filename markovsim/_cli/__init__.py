"""The ``markovsim`` command line: one module per command.

Commands: ``repro``, ``train``, ``infer``, ``goodput``, ``plan``, ``sweep``, ``validate`` and
``keys``. Every command prints a human-readable table by default, JSON with ``--json``, and
(where it computes numbers) writes ``--csv FILE`` and draws ``--plot FILE``. A mistake in the
input (a missing or malformed model file, an unknown key, a missing unit, a bad ``--set``,
an output that exists without ``--force``) is reported as one line ``markovsim <command>:
error: ...`` on stderr with exit code 2; ``markovsim validate`` exits with 1 when a case lies
outside its tolerance. Warnings are one line each, ``markovsim <command>: warning: ...``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import tomllib

from .._errors import MarkovsimError
from . import _goodput, _infer, _keys, _plan, _repro, _speed, _sweep, _train, _validate

__all__ = ["main", "build_parser"]

_COMMANDS = (_repro, _train, _infer, _goodput, _plan, _sweep, _validate, _keys)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="markovsim",
        description="Markov models of AI-cluster goodput, reliability and scaling.",
        epilog=textwrap.dedent("""\
            Model files are TOML; a bare name such as pangu_ultra_135b_8k is a preset shipped
            with markovsim (models/<plans|inference|...>/), a path is relative to the working
            directory. Errors in the input are reported as one line on stderr with exit code 2."""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        command = module.add_parser(sub)
        _speed.add_options(command)
        command.set_defaults(module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    command_line = argv is None  # the persistent compile cache only for a real command line
    args = parser.parse_args(argv)
    if not getattr(args, "module", None):
        parser.print_help()
        return 0
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split("\n"))
        print(f"markovsim {args.command}: warning: {text}", file=sys.stderr)

    try:
        with warnings.catch_warnings(), _speed.compile_support(args, command_line=command_line):
            warnings.showwarning = one_line  # filters stay as they are (errors in markovsim's own tests)
            return int(args.module.run(args) or 0)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (MarkovsimError, OSError, tomllib.TOMLDecodeError) as exc:
        message = " ".join(str(exc).split("\n"))
        print(f"markovsim {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``markovsim`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._errors import MarkovsimError

__all__ = ["main"]


def _cmd_repro(args) -> int:
    from . import repro

    if args.list:
        for name, ids in repro.script_ids().items():
            print(f"{name:28s} {' '.join(ids)}")
        return 0
    selection = args.ids or ["all"]
    rows = repro.run_reproductions(selection, Path(args.out), log=(lambda m: print(m, file=sys.stderr)))
    results, report = repro.write_report(rows, Path(args.out))
    print(repro.format_table(rows))
    print(f"\nwrote {results} and {report}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="markovsim",
        description="Markov models of AI-cluster goodput, reliability and scaling.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("repro", help="run the reproductions of the published figures")
    p.add_argument("ids", nargs="*", help="seed ids (e.g. S-HW-1), script names, or 'all' (default)")
    p.add_argument("--list", action="store_true", help="list the reproduction scripts and their ids")
    p.add_argument("--out", default="repro_out", help="output directory (default: repro_out)")
    p.set_defaults(func=_cmd_repro)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except MarkovsimError as exc:
        print(f"markovsim {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

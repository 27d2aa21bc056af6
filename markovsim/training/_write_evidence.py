"""Regenerate ``models/cases/holdout_evidence.json`` from the shipped suites (module
``_evidence``): ``python -m markovsim.training._write_evidence``. A module of its own so that
running it does not re-execute a module the package has already imported."""

from ._evidence import main

if __name__ == "__main__":  # pragma: no cover - a maintenance command, checked by the test of the table
    main()

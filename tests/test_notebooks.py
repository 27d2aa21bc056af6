"""Every tutorial notebook in docs/tutorials executes without error (nbclient, python3 kernel
of this interpreter)."""

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = Path(__file__).resolve().parent.parent / "docs" / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))


@pytest.fixture
def kernel_of_this_interpreter(tmp_path, monkeypatch):
    """A 'python3' kernelspec that runs this very interpreter (the venv with markovsim), found
    before any system-wide 'python3' kernelspec that might point at another Python."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (markovsim tests)",
        "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return "python3"


def test_there_are_tutorials():
    assert NOTEBOOKS, "docs/tutorials has no notebooks"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_of_this_interpreter):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=kernel_of_this_interpreter, timeout=300,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()   # raises CellExecutionError with the failing cell and traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors

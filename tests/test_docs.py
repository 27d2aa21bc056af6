"""The docs site: every public name is in the reference, every page is in the nav, the
reproduction report is embedded when it exists, and ``mkdocs build --strict`` passes."""

import importlib
import importlib.util
import os
import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

import markovsim

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"


def public_packages() -> dict[str, types.ModuleType]:
    """markovsim and each of its public modules/subpackages that defines ``__all__``.

    Found by walking the package, so the reference check grows as packages land. A module
    that fails to import fails the test (it would fail the docs build too); a folder that
    is not yet a package (no ``__init__.py``, no ``__all__``) is skipped.
    """
    found = {"markovsim": markovsim}
    for info in pkgutil.iter_modules(markovsim.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"markovsim.{info.name}")
        if getattr(module, "__file__", None) and hasattr(module, "__all__"):
            found[module.__name__] = module
    return found


def directives() -> set[str]:
    """Objects documented with ``::: name`` in the reference pages."""
    names = set()
    for page in REFERENCE.glob("*.md"):
        names.update(re.findall(r"^:::\s*([\w.]+)\s*$", page.read_text(), flags=re.M))
    return names


def covered_by_top_level(module) -> bool:
    """Every public name of ``module`` is re-exported (the same object) by ``markovsim``."""
    return all(n in markovsim.__all__ and getattr(markovsim, n) is getattr(module, n) for n in module.__all__)


def test_every_public_package_has_a_reference_page():
    documented = directives()
    assert "markovsim" in documented
    missing = [name for name, module in public_packages().items()
               if name not in documented and not covered_by_top_level(module)]
    assert not missing, f"add docs/reference/<name>.md with '::: <name>' (and a nav entry) for {missing}"


def test_every_all_entry_exists():
    for name, module in public_packages().items():
        absent = [n for n in module.__all__ if not hasattr(module, n)]
        assert not absent, f"{name}.__all__ lists names it does not define: {absent}"


def nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def read_mkdocs_yml() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may use !!python/name or !ENV tags; the nav needs none of them
    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def test_every_page_and_notebook_is_in_the_nav():
    nav = set(nav_pages(read_mkdocs_yml()["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*") if p.suffix in (".md", ".ipynb")
             and "hooks" not in p.parts and ".ipynb_checkpoints" not in p.parts}
    assert pages - nav == set(), "pages missing from the nav in mkdocs.yml"
    assert nav - pages == set(), "nav entries without a page"
    assert any(p.startswith("tutorials/") for p in pages)


def load_hook():
    spec = importlib.util.spec_from_file_location("repro_report_hook", DOCS / "hooks" / "repro_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_page(uri):
    return types.SimpleNamespace(file=types.SimpleNamespace(src_uri=uri))


def test_report_page_without_a_report_says_how_to_make_it(tmp_path, monkeypatch):
    hook = load_hook()
    monkeypatch.setenv("MARKOVSIM_REPRO_OUT", str(tmp_path / "absent"))
    config = types.SimpleNamespace(config_file_path=str(ROOT / "mkdocs.yml"))
    text = (DOCS / "background" / "report.md").read_text()
    out = hook.on_page_markdown(text, fake_page("background/report.md"), config, None)
    assert hook.MARKER not in out and "make repro" in out and "!!! note" in out
    assert hook.on_page_markdown(text, fake_page("index.md"), config, None) == text


@pytest.mark.slow
def test_mkdocs_build_strict_and_every_public_name_has_an_anchor(tmp_path):
    # a stand-in for repro_out/: the report and one plot must be embedded in the site
    out = tmp_path / "repro_out"
    out.mkdir()
    (out / "report.md").write_text("# markovsim reproduction report\n\n| id | status |\n|---|---|\n"
                                   "| S-TEST-1 | reproduced |\n\n## Plots\n\n![fig.png](fig.png)\n")
    (out / "fig.png").write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    site = tmp_path / "site"
    env = dict(os.environ, MARKOVSIM_REPRO_OUT=str(out), NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    report = (site / "background" / "report.html").read_text()
    assert "S-TEST-1" in report and 'src="repro/fig.png"' in report
    assert (site / "background" / "repro" / "fig.png").is_file()

    html = "".join(p.read_text() for p in (site / "reference").glob("*.html"))
    anchors = set(re.findall(r'id="([\w.]+)"', html))
    missing = [f"{name}.{n}" for name, module in public_packages().items() for n in module.__all__
               if f"{name}.{n}" not in anchors and f"markovsim.{n}" not in anchors]
    assert not missing, f"public names missing from the reference pages: {missing}"
    for notebook in (DOCS / "tutorials").glob("*.ipynb"):
        assert (site / "tutorials" / f"{notebook.stem}.html").is_file()

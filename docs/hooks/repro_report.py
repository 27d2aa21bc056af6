"""mkdocs hook: embed the reproduction report (``repro_out/report.md``) in the docs.

``make repro`` writes ``repro_out/report.md`` and its plots. When they exist at build time,
the page ``background/report.md`` gets the report in place of the marker
``<!-- repro-report -->`` and the plots are copied next to it (``background/repro/``).
On a clean clone (no ``repro_out/`` yet) the page says how to produce it, so
``mkdocs build --strict`` passes either way. Set ``MARKOVSIM_REPRO_OUT`` to read another folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.structure.files import File

MARKER = "<!-- repro-report -->"
PAGE = "background/report.md"
PLOTS = "background/repro"


def _out_dir(config) -> Path:
    root = Path(config.config_file_path).resolve().parent
    return Path(os.environ.get("MARKOVSIM_REPRO_OUT", root / "repro_out"))


def on_files(files, config):
    out = _out_dir(config)
    if (out / "report.md").is_file():
        for png in sorted(out.glob("*.png")):
            files.append(File.generated(config, f"{PLOTS}/{png.name}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE or MARKER not in markdown:
        return markdown
    report = _out_dir(config) / "report.md"
    if not report.is_file():
        text = ('!!! note "The report has not been generated in this build"\n'
                "    Run `make repro` (it writes `repro_out/report.md`, `repro_out/results.json` "
                "and the plots), then `make docs`: this page then shows the full report.\n")
        return markdown.replace(MARKER, text)
    body = report.read_text()
    body = re.sub(r"\A# [^\n]*\n", "", body)                           # the page has its own title
    body = re.sub(r"!\[([^\]]*)\]\(([^)/]+\.png)\)", rf"![\1]({PLOTS.split('/')[-1]}/\2)", body)
    return markdown.replace(MARKER, body)

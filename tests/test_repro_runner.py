"""The reproduction runner: expectations, provenance, the status rules, the CLI."""

import json
import math
import re
from pathlib import Path

import pytest

from markovsim import MarkovsimError, _cli, repro
from markovsim.repro import Expectation, ModelValue, Sweep, assumed, cited, derive_status, fitted

ROOT = Path(__file__).resolve().parent.parent
PAPER_REPRO = ROOT / "paper_repro"


def test_repro_writes_results_and_report(tmp_path, capsys):
    assert _cli.main(["repro", "S-HW-1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in rows] == ["S-HW-1"]
    assert set(rows[0]) >= {"key", "id", "quantity", "scope", "reported", "model", "unit", "tolerance", "status",
                            "why", "inputs", "script", "quote", "source", "reason"}
    assert all(i["provenance"] in ("cited", "assumption") for i in rows[0]["inputs"])
    report = (tmp_path / "report.md").read_text()
    assert "| input | value | provenance | source |" in report
    out = capsys.readouterr().out
    assert re.search(r"Summary: (\d+ [a-z-]+, ){7}\d+ not-yet", out)


def test_repro_unknown_id_is_a_clear_error(tmp_path, capsys):
    assert _cli.main(["repro", "S-NOPE-9", "--out", str(tmp_path)]) == 2
    assert "S-NOPE-9" in capsys.readouterr().err


def test_repro_list(capsys):
    assert _cli.main(["repro", "--list"]) == 0
    assert "S-HW-1" in capsys.readouterr().out


# --------------------------------------------------------------------------- the status rules


def _figure(**kw):
    base = dict(key="X-1", id="X-1", source="s", quote="q", scope="job", quantity="x", unit="1", kind="figure",
                check="abs", reason="r", value=1.0, tol=0.1)
    base.update(kw)
    return Expectation(**base)


CITED = cited("a", 1.0, "1", "X-1")
ASSUMED = assumed("b", 2.0, "1", "not published")


@pytest.mark.parametrize("value, status", [
    (ModelValue("X-1", None, "1"), "not-yet"),
    (ModelValue("X-1", 1.05, "1", [CITED]), "reproduced"),
    (ModelValue("X-1", 1.05, "1", [CITED, ASSUMED]), "matches-with-assumption"),
    (ModelValue("X-1", 1.05, "1", [CITED, fitted("c", 3, "1", on="X-2", how="h")]), "matches-with-assumption"),
    (ModelValue("X-1", 1.05, "1", [CITED, fitted("c", 3, "1", on="X-1", how="h")]), "calibrated"),
    (ModelValue("X-1", 2.0, "1", [CITED, fitted("c", 3, "1", on="X-1", how="h")]), "calibrated"),
    # a sweep over cited ranges entirely inside the tolerance
    (ModelValue("X-1", 1.0, "1", [CITED], Sweep(("a",), ((1,), (2,)), (0.95, 1.05))), "reproduced"),
    # part of the plausible range agrees: never more than a match with an assumption
    (ModelValue("X-1", 1.5, "1", [CITED], Sweep(("a",), ((1,), (2,)), (1.0, 1.5))), "matches-with-assumption"),
    (ModelValue("X-1", None, "1", [ASSUMED], Sweep(("b",), ((1,), (2,)), (1.0, 1.5))), "matches-with-assumption"),
    (ModelValue("X-1", 1.5, "1", [CITED], mechanism="m"), "miss"),
    (ModelValue("X-1", 1.5, "1", [CITED], Sweep(("a",), ((1,),), (1.4,)), mechanism="m"), "miss"),
    (ModelValue("X-1", 1.5, "1", [ASSUMED], Sweep(("b",), ((1,), (2,)), (1.4, 1.6))), "inconsistent"),
])
def test_status_from_numbers_and_provenance(value, status):
    assert derive_status(_figure(), value)[0] == status


@pytest.mark.parametrize("kind", ["scenario", "qualitative"])
def test_nothing_to_compare_is_a_what_if(kind):
    e = _figure(kind=kind, check="none", value=None, tol=None)
    assert derive_status(e, ModelValue("X-1", 0.3, "1", [ASSUMED]))[0] == "what-if"
    assert derive_status(e, ModelValue("X-1", None, "1"))[0] == "not-yet"


def _prediction(**kw):
    return _figure(kind="prediction", check="none", value=None, tol=None,
                   check_against="the held-back part of a log", **kw)


def test_a_prediction_is_to_be_checked_and_needs_its_interval():
    e = _prediction()
    status, why = derive_status(e, ModelValue("X-1", 3.0, "1", [CITED], interval=(2.0, 5.0), level=0.9))
    assert status == "to-check" and "the held-back part of a log" in why
    assert derive_status(e, ModelValue("X-1", None, "1"))[0] == "not-yet"
    with pytest.raises(MarkovsimError, match="prediction interval"):
        derive_status(e, ModelValue("X-1", 3.0, "1", [CITED]))
    # only a prediction carries an interval
    with pytest.raises(MarkovsimError, match="only a prediction"):
        derive_status(_figure(), ModelValue("X-1", 1.0, "1", [CITED], interval=(0.5, 2.0), level=0.9))


@pytest.mark.parametrize("model, interval, level, message", [
    (3.0, (4.0, 5.0), 0.9, "does not hold its median"),
    (3.0, (2.0, math.nan), 0.9, "does not hold its median"),
    ([1.0, 2.0], [(0.0, 2.0)], 0.9, "does not match"),
    (3.0, (2.0, 5.0), 1.5, "level"),
])
def test_the_runner_refuses_a_broken_interval(model, interval, level, message):
    e = {"X-1": _prediction()}
    with pytest.raises(MarkovsimError, match=message):
        _run([ModelValue("X-1", model, "1", [CITED], interval=interval, level=level)], e)
    rows = _run([ModelValue("X-1", [1.0, 2.0], "1", [CITED], interval=[(0.0, 2.0), (1.0, math.inf)], level=0.9)], e)
    assert rows[0].status == "to-check" and rows[0].check_against == "the held-back part of a log"


def test_outside_tolerance_without_a_mechanism_or_a_sweep_is_refused():
    with pytest.raises(MarkovsimError, match="neither the mechanism"):
        derive_status(_figure(), ModelValue("X-1", 1.5, "1", [CITED]))


def test_a_model_value_needs_its_inputs():
    with pytest.raises(MarkovsimError, match="without inputs"):
        derive_status(_figure(), ModelValue("X-1", 1.0, "1"))


@pytest.mark.parametrize("expectation, inside, outside", [
    (_figure(check="rel", value=30.0, tol=0.25), 37.4, 37.6),
    (_figure(check="interval", low=1.0, high=3.0, value=[1, 3]), 3.0, 3.01),
    (_figure(check="above", value=24.0), 24.01, 24.0),
    (_figure(check="below", value=180.0), 179.0, 180.0),
    (_figure(check="abs", value=[600.0, 2000.0], tol=[50.0, 500.0]), [640.0, 1600.0], [660.0, 1600.0]),
])
def test_checks(expectation, inside, outside):
    assert expectation.holds(inside) and not expectation.holds(outside)
    assert not expectation.holds([math.nan, math.nan] if isinstance(inside, list) else math.nan)


def test_inputs_carry_a_valid_provenance():
    with pytest.raises(MarkovsimError, match="provenance"):
        repro.Input("a", 1, "1", "published", "x")
    with pytest.raises(MarkovsimError, match="source"):
        repro.Input("a", 1, "1", "cited", "")
    assert fitted("a", 1, "1", on="X-9", how="h").fitted_on == "X-9"


def _run(values, expectations, complete=True):
    return repro._make_rows([("paper_repro/t.py", v) for v in values], expectations, complete=complete)


def test_runner_refuses_what_would_hide_a_verdict():
    e = {"X-1": _figure(), "X-2": _figure(key="X-2", id="X-2")}
    ok = ModelValue("X-2", 1.0, "1", [CITED])
    with pytest.raises(MarkovsimError, match="unit"):
        _run([ModelValue("X-1", 1.0, "h", [CITED]), ok], e)
    with pytest.raises(MarkovsimError, match="NaN"):
        _run([ModelValue("X-1", math.nan, "1", [CITED]), ok], e)
    with pytest.raises(MarkovsimError, match="twice"):
        _run([ok, ok], e)
    with pytest.raises(MarkovsimError, match="X-1"):  # a figure nobody computes
        _run([ok], e)
    with pytest.raises(MarkovsimError, match="not in the expectations"):
        _run([ModelValue("X-3", 1.0, "1", [CITED])], e, complete=False)
    # a fit that no other row uses is never tested
    with pytest.raises(MarkovsimError, match="tested on another figure"):
        _run([ModelValue("X-1", 1.0, "1", [fitted("c", 1, "1", on="X-1", how="h")]), ok], e)
    rows = _run([ModelValue("X-1", 1.0, "1", [fitted("c", 1, "1", on="X-1", how="h")]),
                 ModelValue("X-2", 1.0, "1", [fitted("c", 1, "1", on="X-1", how="h")])], e)
    assert [r.status for r in rows] == ["calibrated", "matches-with-assumption"]
    assert rows[0].tested_on == ("X-2",)


# --------------------------------------------------------------------------- files


def test_expectations_file_has_a_quoted_source_and_a_reason_for_every_figure():
    exp = repro.load_expectations(PAPER_REPRO / "expectations.toml")
    assert len(exp) > 60
    for e in exp.values():
        assert e.quote.strip() and e.source.strip() and e.reason.strip() and e.scope.strip(), e.key
        if e.kind == "figure":
            assert e.check != "none" and e.unit, e.key


GOOD = ('[[figure]]\nkey = "X-1"\nid = "X-1"\nsource = "s"\nquote = "q"\nscope = "job"\nquantity = "x"\n'
        'unit = "1"\nkind = "figure"\ncheck = "abs"\nvalue = 1.0\ntol = 0.1\nreason = "r"\n')


@pytest.mark.parametrize("old, new, message", [
    ('kind = "figure"', 'kind = "nope"', "kind='nope'"),
    ('check = "abs"', 'check = "near"', "check='near'"),
    ('reason = "r"', "", "missing reason"),
    ("tol = 0.1", "", "needs value, tol"),
    ('key = "X-1"', 'key = "Y-1"', "must be the id"),
    ('kind = "figure"', 'kind = "scenario"', "a figure needs a check"),
    ('kind = "figure"\ncheck = "abs"', 'kind = "prediction"\ncheck = "none"', "names the held-back data"),
    ('reason = "r"', 'reason = "r"\ncheck_against = "later data"', "names the held-back data"),
])
def test_expectations_file_is_checked(tmp_path, old, new, message):
    (tmp_path / "e.toml").write_text(GOOD)
    assert list(repro.load_expectations(tmp_path / "e.toml")) == ["X-1"]
    (tmp_path / "e.toml").write_text(GOOD.replace(old, new))
    with pytest.raises(MarkovsimError, match=re.escape(message)):
        repro.load_expectations(tmp_path / "e.toml")


def test_model_file_comments_give_the_provenance(tmp_path):
    f = tmp_path / "models" / "recovery" / "r.toml"
    f.parent.mkdir(parents=True)
    f.write_text('name = "r"\nstep_time = "10 s"   # assumption: a guess\n[checkpoint]\n'
                 'interval = "1 h"   # source: public_inputs, hourly\nsave_time = "2 s"  # derived: 1 + 1\n'
                 '[[tiers]]\nname = "retry"\ncomm_setup_base = "5 s"  # source: X-1\ncoverage = 0.9\n')
    by_name = {i.name.split(": ")[1]: i for i in repro.inputs_from_model_file(
        f, root=tmp_path, taken_from={"tiers[retry].comm_setup_base": "X-1"})}
    assert {k: i.provenance for k, i in by_name.items()} == {
        "step_time": "assumption", "checkpoint.interval": "cited", "checkpoint.save_time": "assumption",
        "tiers[retry].comm_setup_base": "fitted-on:X-1", "tiers[retry].coverage": "assumption"}
    summary = repro.inputs_from_model_file(f, root=tmp_path, summary=True, taken_from={"tiers[retry].comm_setup_base": "X-1"})
    assert [(i.provenance, i.value) for i in summary] == [("cited", 1), ("assumption", 3), ("fitted-on:X-1", '"5 s"')]
    with pytest.raises(MarkovsimError, match="not in the file"):
        repro.inputs_from_model_file(f, taken_from={"tiers[nope].x": "X-1"})


def test_a_field_fitted_on_a_public_data_set_is_cited_to_it(tmp_path):
    f = tmp_path / "models" / "faults" / "c.toml"
    f.parent.mkdir(parents=True)
    f.write_text('name = "c"\n[[components]]\nname = "gpu"\nrate = "0.001 /d"   # derived: Trace fit, class GPU\n'
                 'units_per_scope = 1   # source: per server\nshare = 0.3   # assumption: a guess\n')
    fits = {"Trace fit": "the public trace"}
    by_name = {i.name.split(": ")[1]: i for i in repro.inputs_from_model_file(f, root=tmp_path, data_fits=fits)}
    assert by_name["components[gpu].rate"].provenance == "cited"
    assert by_name["components[gpu].rate"].source.startswith("fitted on the public trace")
    assert by_name["components[gpu].share"].provenance == "assumption"
    summary = repro.inputs_from_model_file(f, root=tmp_path, data_fits=fits, summary=True)
    assert [(i.provenance, i.value, i.fields) for i in summary] == [
        ("cited", 1, ()), ("assumption", 1, ()), ("cited", 1, ("components[gpu].rate",))]
    # the report's list of the file's fields shows the same provenance
    v = ModelValue("X-1", 1.0, "1", summary)
    rows = _run([v], {"X-1": _figure()})
    repro.write_report(rows, tmp_path / "out", expectations={"X-1": _figure()}, model_root=tmp_path)
    report = (tmp_path / "out" / "report.md").read_text()
    assert re.search(r"\| components\[gpu\]\.rate \| \S+ /d\S* \| cited \| fitted on the public trace", report)
    assert "| components[gpu].share | 0.3 | assumption |" in report


STATUS_WORD = re.compile(r"\b(reproduced|explained|inconsistent|calibrated|miss|what-if|not-yet|to-check|"
                         r"matches-with-assumption)\b", re.IGNORECASE)


def test_no_status_literal_in_paper_repro():
    # the scripts compute model values; only markovsim.repro derives a status
    found = [f"{p.name}:{n}: {line.strip()}" for p in sorted(PAPER_REPRO.iterdir()) if p.is_file()
             for n, line in enumerate(p.read_text().splitlines(), 1) if STATUS_WORD.search(line)]
    assert not found, "\n".join(found)


def test_repro_all_reports_the_shipped_validation_suites(tmp_path, monkeypatch):
    """``markovsim repro all`` adds each shipped validation suite with its target verdicts,
    taken from the report (computed from the rows), an error plot and validation.json."""
    from markovsim import validate
    from markovsim._cli import _repro as cli_repro

    from .training._shipped import validated

    # the suites' reports, computed once per test process (this module shares a worker with
    # the other readers of the shipped suites: tests/conftest.py)
    monkeypatch.setattr(validate, "validate_cases", validated)
    found = cli_repro._validations(tmp_path)
    assert [t for t, _, _ in found] == [t for _, t in cli_repro.VALIDATION_SUITES]
    title, report, png = found[0]
    assert (tmp_path / png).stat().st_size > 10_000
    _, md = repro.write_report([], tmp_path, validations=found)
    text = md.read_text()
    assert f"## Validation: {title}" in text and f"![{png}]({png})" in text
    assert text.count(f"]({png})") == 1                       # embedded once, not again under "Plots"
    verdicts = report.target_verdicts()
    assert {v["target"] for v in verdicts} == {"median", "max", "points"}
    for v in verdicts:
        word = "met" if v["met"] else "**missed**"
        unit = " points" if v["target"] == "points" else " %"
        if v["interval"] is not None and not v["settled"]:  # a median the rows do not settle says so
            lo, hi = (100 * x for x in v["interval"])
            word += f" (not settled: the median's 95 % interval is {lo:.2f}-{hi:.2f}{unit})"
        assert f"| {100 * v['measured']:.2f}{unit} | {word} |" in text
    # every holdout row of the suite is in the report's table, with its own error
    for r in report.rows:
        if r.role == "holdout" and not r.points:
            assert f"| {r.output} | {r.reported:.6g} | {r.predicted:.6g} | {100 * r.error:.2f} % |" in text
    saved = json.loads((tmp_path / "validation.json").read_text())
    assert saved[title]["targets"] == json.loads(json.dumps(verdicts))

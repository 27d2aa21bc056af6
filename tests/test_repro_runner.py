import json

from markovsim import _cli


def test_repro_writes_results_and_report(tmp_path, capsys):
    assert _cli.main(["repro", "S-HW-1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in rows] == ["S-HW-1"]
    assert set(rows[0]) >= {"id", "quantity", "reported", "model", "unit", "tolerance", "status", "inputs", "script"}
    assert (tmp_path / "report.md").exists()


def test_repro_unknown_id_is_a_clear_error(tmp_path, capsys):
    assert _cli.main(["repro", "S-NOPE-9", "--out", str(tmp_path)]) == 2
    assert "S-NOPE-9" in capsys.readouterr().err


def test_repro_list(capsys):
    assert _cli.main(["repro", "--list"]) == 0
    assert "S-HW-1" in capsys.readouterr().out

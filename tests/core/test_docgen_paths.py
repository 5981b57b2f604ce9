"""``python -m zeus_core.docgen`` works on the docs folder where it is run (or ``--docs``),
never on the installed package's folder."""

from __future__ import annotations

from pathlib import Path

from zeus_core import docgen

REPO = Path(__file__).resolve().parents[2]


def test_without_a_docs_folder_here_it_refuses_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert docgen.main([]) == 2
    assert docgen.main(["--check"]) == 2
    assert "no docs folder in" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_it_writes_and_checks_the_docs_folder_where_it_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    assert docgen.main(["--check"]) == 1
    assert "docs/hooks.md is stale" in capsys.readouterr().err
    assert docgen.main([]) == 0
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == sorted(docgen.FILES)
    assert docgen.main(["--check"]) == 0
    assert (tmp_path / "docs" / "api.md").read_text() == (REPO / "docs" / "api.md").read_text()


def test_docs_names_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert docgen.main(["--docs", str(tmp_path / "out")]) == 0
    assert docgen.main(["--check", "--docs", str(tmp_path / "out")]) == 0

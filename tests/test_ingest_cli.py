"""``tracelens import`` into a real DuckDB file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES, ROOT

from tracelens.cli import main
from tracelens.store import DuckDBStore

YELP = FIXTURES / "zipkin/yelp.json"
HOTROD = FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"


def _import(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["import", *args])
    return result.exit_code, result.stdout, result.stderr


def _count(db: Path) -> int:
    with DuckDBStore(db, read_only=True) as store:
        return store.count()


def test_import_counts_and_dedups(tmp_path: Path) -> None:
    db = tmp_path / "spans.duckdb"
    code, out, _ = _import(str(YELP), str(HOTROD), "--db", str(db))
    assert code == 0
    assert "read 56 spans in 2 traces from 2 files; 56 new" in out
    assert _count(db) == 56
    code, out, _ = _import(str(YELP), "--db", str(db))
    assert code == 0
    assert "read 16 spans in 1 trace from 1 file; 0 new" in out
    assert _count(db) == 56


def test_bad_file_exits_2_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "spans.duckdb"
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [\n  {"scopeSpans": [\n')
    code, out, err = _import(str(YELP), str(bad), "--db", str(db))
    assert code == 2
    assert f"error: {bad}:" in err and "invalid JSON" in err
    assert out == ""
    assert not db.exists()


def test_keep_going_imports_the_good_files(tmp_path: Path) -> None:
    db = tmp_path / "spans.duckdb"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    code, out, err = _import(
        str(bad), str(YELP), str(tmp_path / "gone.json"), "--keep-going", "--db", str(db)
    )
    assert code == 2
    assert "unrecognised format" in err and "no such file" in err
    assert "2 of 3 files failed" in err
    assert "read 16 spans in 1 trace from 1 file; 16 new" in out
    assert _count(db) == 16
    code, _, _ = _import(str(YELP), "--keep-going", "--db", str(db))
    assert code == 0


def test_input_format_option_and_warnings(tmp_path: Path) -> None:
    db = tmp_path / "spans.duckdb"
    smartthings = FIXTURES / "zipkin/smartthings-oauth-authorization.json"
    code, out, err = _import(str(smartthings), "--input-format", "zipkin", "--db", str(db))
    assert code == 0
    assert "warning:" in err and "no duration" in err
    assert "175 new" in out
    code, _, err = _import(str(smartthings), "--input-format", "jaeger", "--db", str(db))
    assert code == 2 and "error:" in err
    code, _, err = _import(str(smartthings), "--input-format", "csv", "--db", str(db))
    assert code == 2 and "csv" in err  # click's usage error


def test_db_from_environment_in_a_subprocess(tmp_path: Path) -> None:
    db = tmp_path / "env.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "import", str(HOTROD)],
        env={"TRACELENS_DB": str(db), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "read 40 spans in 1 trace from 1 file; 40 new" in proc.stdout
    assert _count(db) == 40


def test_cli_formats_are_the_importers() -> None:
    from tracelens.cli._options import INPUT_FORMATS
    from tracelens.ingest import FORMATS

    assert tuple(INPUT_FORMATS) == tuple(FORMATS)


def test_the_cli_detection_and_readme_come_from_the_formats_table() -> None:
    """One table (tracelens/formats.py): the CLI's choices, detection's formats, the JSON
    shapes it tries (each detected by its own module), its "tried" message and README's
    ``--input-format`` line all name exactly the table's formats."""
    from tracelens.cli.analyze import analyze
    from tracelens.formats import INPUT_FORMATS, NAMES
    from tracelens.ingest import detect

    choice = next(p for p in analyze.params if p.name == "input_format")
    assert tuple(choice.type.choices) == NAMES == ("otlp-json", "otlp-proto", "jaeger", "zipkin")
    assert detect.FORMATS == NAMES
    assert set(detect.JSON_CODECS) == set(detect.JSON_FORMATS) == {"otlp-json", "jaeger", "zipkin"}
    assert {n: m.__name__ for n, m in detect.JSON_CODECS.items()} == {
        f.name: f"tracelens.ingest.{f.decoder}" for f in INPUT_FORMATS if f.json
    }
    # Detection by shape: a minimal document of each JSON format is told as that format.
    docs = {
        "otlp-json": {"resourceSpans": []},
        "jaeger": {"data": []},
        "zipkin": [{"traceId": "a" * 32, "id": "b" * 16}],
    }
    assert {name: detect.json_format(doc) for name, doc in docs.items()} == {n: n for n in docs}
    for f in INPUT_FORMATS:
        assert f"{f.name} ({f.recognised_by})" in detect.TRIED
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"- `--input-format {'|'.join(NAMES)}`" in readme


def test_import_files_is_the_library_form(tmp_path: Path) -> None:
    from tracelens.api import import_files

    db = str(tmp_path / "lib.duckdb")
    done = import_files([YELP, HOTROD], db=db)
    assert (done.files, done.spans, done.traces, done.added, done.db) == (2, 56, 2, 56, db)
    again = import_files([YELP], db=db, keep_going=True)
    assert (again.files, again.spans, again.traces, again.added) == (1, 16, 1, 0)
    assert _count(tmp_path / "lib.duckdb") == 56

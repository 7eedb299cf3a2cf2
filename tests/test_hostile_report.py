"""``tritonwatch report`` against a server that answers JSON but not Prometheus's shapes (issue 23 case 9):
one line naming the server and the API path, exit 1, never a traceback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_report_prometheus import END, blocks, prometheus  # noqa: F401 (fixtures: the synthetic week)

from tritonwatch.cli import main
from tritonwatch.local.promstack import Prometheus

ANSWERS = {
    "list body": [],
    "value without a number": {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0]}]},
    },
    "result not a list": {"status": "success", "data": {"resultType": "matrix", "result": "x"}},
    "no data": {"status": "success"},
    "negative value": {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"model": "m"}, "value": [1.0, "-5"]}]},
    },
    "value not a number": {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, {"x": 1}]}]},
    },
}


@pytest.fixture(params=sorted(ANSWERS))
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    body = json.dumps(ANSWERS[request.param]).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_malformed_prometheus_answer_is_one_line(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: KeyError, IndexError, TypeError or AttributeError tracebacks out of the report; a negative
    value gave exit 0 and an availability of 6 (600%)."""
    out = tmp_path / "report"
    code = main(["report", "--prometheus", server, "--end", "2026-03-01T00:00:00Z", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len([line for line in err if server in line]) == 1, err
    assert "Traceback" not in "\n".join(err)
    assert not out.exists() or not any(out.iterdir())


def test_a_charts_folder_that_cannot_be_made_leaves_no_half_report(
    prometheus: Prometheus,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: report.html, report.md and the CSV files were written, then the charts failed."""
    out = tmp_path / "report"
    out.mkdir()
    (out / "charts").write_text("a file where the charts folder goes\n")
    code = main(["report", "--prometheus", prometheus.url, "--end", END, "--days", "7", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert (
        err[-1]
        == f"tritonwatch report: error: --out {out}: cannot write the report (File exists: {out / 'charts'})"
    )
    assert sorted(p.name for p in out.iterdir()) == ["charts"]

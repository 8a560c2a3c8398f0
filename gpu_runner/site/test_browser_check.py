#!/usr/bin/env python3
"""Self-tests of browser_check.py: a good site passes, and each check fails a
site that has exactly that one fault.

    python3 gpu_runner/site/test_browser_check.py [-v] [TestName...]

Each test writes a small site (the shape `gpu-runner report --html` writes:
index.html with table#gateway-matrix, a stylesheet, a page per matrix cell)
and the gateway reports it stands for into a temporary directory, runs
browser_check.py on them as a subprocess, and reads its exit status and
output. The reports include an -instruct.json report and a report without
`results`, both of which the matrix must leave out.

They need Chromium (env CHROMIUM, else chromium, chromium-browser or
google-chrome on PATH) and nothing else: no Rust build, no network. Without
Chromium they fail, saying so, unless SITE_BROWSER_CHECK_SKIP=1 is set (then
they are skipped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECK = HERE / "browser_check.py"
sys.path.insert(0, str(HERE))
import browser_check  # noqa: E402  (for find_chromium and the outcome classes)

try:
    CHROMIUM: str | None = browser_check.find_chromium()
    NO_CHROMIUM = ""
except browser_check.SetupError as e:
    CHROMIUM = None
    NO_CHROMIUM = str(e)

SCENARIOS = ["a", "b", "c"]

# The reports the fixture site stands for. gw2 has no result for scenario c
# (its cell is `none`); gw2-instruct.json and faults-gw2.json must not be rows.
REPORTS = {
    "ref-gw.json": {
        "gateway": "ref-gw",
        "results": [
            {"scenario": "a", "outcome": "pass"},
            {"scenario": "b", "outcome": "pass"},
            {"scenario": "c", "outcome": "expected failure"},
        ],
    },
    "gw2.json": {
        "gateway": "gw2",
        "results": [
            {"scenario": "a", "outcome": "fail"},
            {"scenario": "b", "outcome": "skip"},
        ],
    },
    "gw2-instruct.json": {"gateway": "gw2-instruct", "results": [{"scenario": "z", "outcome": "pass"}]},
    "faults-gw2.json": {"gateway": "gw2", "deadline_s": 5, "cases": []},
}
GATEWAYS = ["ref-gw", "gw2"]


def outcome_class(gateway: str, scenario: str) -> str:
    report = next(r for r in REPORTS.values() if r["gateway"] == gateway and "results" in r)
    for r in report["results"]:
        if r["scenario"] == scenario:
            return browser_check.OUTCOME_CLASS[r["outcome"]]
    return browser_check.NO_RESULT_CLASS


def page(title: str, body: str, up: str = "") -> str:
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f'<title>{title}</title><link rel="stylesheet" href="{up}style.css"></head>\n'
        f"<body>\n{body}\n</body></html>\n"
    )


def good_site() -> dict[str, str]:
    """A site with no fault: relative path -> text."""
    head = "".join(f'<th class="scenario" data-scenario="{s}">{s}</th>' for s in SCENARIOS)
    rows = []
    for i, gw in enumerate(GATEWAYS):
        cls = "gateway reference" if i == 0 else "gateway"
        cells = "".join(
            f'<td class="cell {outcome_class(gw, s)}" data-scenario="{s}">'
            f'<a href="gateways/{gw}/{s}.html">{outcome_class(gw, s)}</a></td>'
            for s in SCENARIOS
        )
        rows.append(f'<tr class="{cls}" data-gateway="{gw}"><th><a href="gateways/{gw}/">{gw}</a></th>{cells}</tr>')
    files = {
        "index.html": page(
            "gateways",
            '<h1 id="top">Gateways</h1>\n'
            '<img src="logo.svg" alt="logo">\n'
            '<table id="gateway-matrix"><thead><tr><th>gateway</th>' + head + "</tr></thead>\n"
            "<tbody>" + "\n".join(rows) + "</tbody></table>\n"
            '<p><a href="about.html#method">method</a> <a href="#top">top</a> '
            '<a href="https://github.com/vllm-project/vllm">vLLM</a> '
            '<a href="mailto:someone@example.com">mail</a></p>\n'
            '<script src="site.js"></script>',
        ),
        "style.css": "body { font-family: sans-serif; }\n.pass { background: #cfc; }\n",
        "site.js": "document.body.dataset.ready = 'yes';\n",
        "logo.svg": '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/></svg>\n',
        "about.html": page("about", '<h1 id="method">Method</h1>\n<a href="index.html">back</a>'),
    }
    for gw in GATEWAYS:
        links = " ".join(f'<a href="{s}.html">{s}</a>' for s in SCENARIOS)
        files[f"gateways/{gw}/index.html"] = page(gw, f"<h1>{gw}</h1>\n{links}", up="../../")
        for s in SCENARIOS:
            files[f"gateways/{gw}/{s}.html"] = page(
                f"{gw} {s}",
                f'<h1 id="detail">{gw}: {s}</h1>\n<p>{outcome_class(gw, s)}</p>\n'
                f'<a href="../../index.html#gateway-matrix">matrix</a> <a href="index.html">{gw}</a> '
                '<a href="#detail">this</a>',
                up="../../",
            )
    return files


def edit(files: dict[str, str], path: str, old: str, new: str) -> None:
    """Replace old (which must occur exactly once) by new in one file."""
    text = files[path]
    assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
    files[path] = text.replace(old, new)


class CheckTest(unittest.TestCase):
    def setUp(self):
        if CHROMIUM is None:
            if os.environ.get("SITE_BROWSER_CHECK_SKIP") == "1":
                self.skipTest(f"SITE_BROWSER_CHECK_SKIP=1: {NO_CHROMIUM}")
            self.fail(
                f"these tests need Chromium: {NO_CHROMIUM}. "
                "Install it, point env CHROMIUM at it, or set SITE_BROWSER_CHECK_SKIP=1 to skip them."
            )
        self.tmp = tempfile.TemporaryDirectory(prefix="site-check-test-")
        self.addCleanup(self.tmp.cleanup)
        self.files = good_site()

    def check(self, *extra: str, env: dict | None = None):
        """Write the site and the reports, run the check; (exit status, output)."""
        root = Path(self.tmp.name)
        site, reports = root / "site", root / "reports"
        for rel, text in self.files.items():
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(text)
        reports.mkdir(exist_ok=True)
        for name, report in REPORTS.items():
            (reports / name).write_text(json.dumps(report))
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(CHECK), str(site), "--reports", str(reports), *extra],
            capture_output=True, text=True, timeout=120, env=env,
        )
        self.seconds = time.monotonic() - started
        return proc.returncode, proc.stdout + proc.stderr

    def assert_fails(self, *needles: str, line_has: tuple[str, ...] = ()) -> str:
        """The check exits 1; the output has every needle, and one line has all of line_has."""
        rc, out = self.check()
        self.assertEqual(rc, 1, f"expected exit status 1:\n{out}")
        for n in needles:
            self.assertIn(n, out)
        if line_has:
            self.assertTrue(
                any(all(n in line for n in line_has) for line in out.splitlines()),
                f"no line has all of {line_has}:\n{out}",
            )
        return out


class AGoodSite(CheckTest):
    def test_a_good_site_passes_the_check(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        pages = sum(rel.endswith(".html") for rel in self.files)
        self.assertIn(f"{pages} pages", out)
        self.assertIn("2 matrix rows", out)
        print(f"\n  good site: {pages} pages in {self.seconds:.1f} s, Chromium start included", file=sys.stderr)

    def test_the_screenshot_is_a_png_of_the_index_and_its_path_is_printed(self):
        png = Path(self.tmp.name) / "shots" / "index.png"
        rc, out = self.check("--screenshot", str(png))
        self.assertEqual(rc, 0, out)
        self.assertIn(str(png), out)
        data = png.read_bytes()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        # The IHDR chunk: width and height of the 1400x1000 viewport.
        self.assertEqual((int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")), (1400, 1000))


class ConsoleErrors(CheckTest):
    def test_a_page_that_throws_fails_the_check(self):
        edit(self.files, "gateways/gw2/b.html", "<p>", "<script>throw new Error('thrown on purpose')</script><p>")
        self.assert_fails(line_has=("gateways/gw2/b.html", "uncaught exception", "thrown on purpose"))

    def test_a_console_error_fails_the_check(self):
        edit(self.files, "about.html", "<h1", "<script>console.error('logged on purpose')</script><h1")
        self.assert_fails(line_has=("about.html", "console.error", "logged on purpose"))

    def test_an_image_of_a_missing_file_fails_the_check_twice_as_a_load_error_and_a_missing_link(self):
        edit(self.files, "gateways/ref-gw/a.html", "<p>", '<img src="missing.png" alt=""><p>')
        out = self.assert_fails(line_has=("gateways/ref-gw/a.html", "browser log error", "missing.png"))
        self.assertTrue(
            any("gateways/ref-gw/a.html" in l and "no such file" in l and "missing.png" in l for l in out.splitlines()),
            out,
        )


class Links(CheckTest):
    def test_a_broken_relative_link_fails_the_check(self):
        edit(self.files, "gateways/gw2/index.html", "<h1>", '<a href="../nowhere.html">lost</a><h1>')
        self.assert_fails(line_has=("gateways/gw2/index.html", "../nowhere.html", "no such file gateways/nowhere.html"))

    def test_a_fragment_naming_no_id_on_another_page_fails_the_check(self):
        edit(self.files, "gateways/ref-gw/c.html", "index.html#gateway-matrix", "index.html#gateway-matrx")
        self.assert_fails(line_has=("gateways/ref-gw/c.html", "no element id 'gateway-matrx' on index.html"))

    def test_a_fragment_naming_no_id_on_its_own_page_fails_the_check(self):
        edit(self.files, "index.html", 'href="#top"', 'href="#bottom"')
        self.assert_fails(line_has=("index.html", "no element id 'bottom' on index.html"))

    def test_an_image_from_the_network_fails_the_check(self):
        edit(self.files, "about.html", "<h1", '<img src="https://example.com/pixel.png" alt=""><h1')
        self.assert_fails(
            line_has=("about.html", '<img src="https://example.com/pixel.png">', "loads from the network")
        )

    def test_a_stylesheet_that_fetches_from_the_network_fails_the_check(self):
        self.files["style.css"] += "body { background: url(https://example.com/bg.png); }\n"
        out = self.assert_fails(line_has=("index.html", "requested https://example.com/bg.png from the network"))
        # Every page that links the stylesheet, each for itself: the request
        # (always), and the browser log's word on its failure (when Chromium
        # logs it before the check leaves the page), nothing else.
        for rel in (r for r in self.files if r.endswith(".html")):
            lines = [l.strip() for l in out.splitlines() if l.strip().startswith(rel + ":")]
            requested = [l for l in lines if "requested https://example.com/bg.png" in l]
            self.assertEqual(len(requested), 1, f"{rel}:\n{out}")
            for l in lines:
                self.assertTrue(l in requested or "browser log error" in l and "bg.png" in l, f"{rel}: {l}\n{out}")
            self.assertLessEqual(len(lines), 2, f"{rel}:\n{out}")

    def test_a_javascript_link_fails_the_check(self):
        edit(self.files, "about.html", "back</a>", "back</a> <a href=\"javascript:alert(1)\">js</a>")
        self.assert_fails(line_has=("about.html", "javascript: links are not allowed"))

    def test_a_link_to_a_directory_without_an_index_fails_the_check(self):
        del self.files["gateways/gw2/index.html"]
        edit(self.files, "gateways/gw2/a.html", '<a href="index.html">gw2</a>', "")
        edit(self.files, "gateways/gw2/b.html", '<a href="index.html">gw2</a>', "")
        edit(self.files, "gateways/gw2/c.html", '<a href="index.html">gw2</a>', "")
        self.assert_fails(line_has=("index.html", 'href="gateways/gw2/"', "a directory without index.html"))


class GatewayMatrix(CheckTest):
    def row(self, gw: str) -> str:
        start = self.files["index.html"].index(f'data-gateway="{gw}"')
        start = self.files["index.html"].rindex("<tr", 0, start)
        end = self.files["index.html"].index("</tr>", start) + len("</tr>")
        return self.files["index.html"][start:end]

    def test_a_matrix_missing_a_gateway_row_fails_the_check(self):
        edit(self.files, "index.html", self.row("gw2"), "")
        self.assert_fails(line_has=("index.html", "no row for gateway gw2"))

    def test_an_extra_row_fails_the_check_even_for_an_instruct_report(self):
        extra = self.row("gw2").replace('data-gateway="gw2"', 'data-gateway="gw2-instruct"')
        edit(self.files, "index.html", "</tbody>", extra + "</tbody>")
        self.assert_fails(line_has=("index.html", "row for gateway gw2-instruct, which no gateway report names"))

    def test_a_gateway_with_two_rows_fails_the_check(self):
        edit(self.files, "index.html", "</tbody>", self.row("gw2") + "</tbody>")
        self.assert_fails(line_has=("index.html", "2 rows for gateway gw2"))

    def test_a_matrix_whose_first_row_is_not_the_reference_fails_the_check(self):
        edit(self.files, "index.html", 'class="gateway reference"', 'class="gateway"')
        self.assert_fails(line_has=("index.html", "first row (gateway ref-gw) lacks class `reference`"))

    def test_a_row_missing_a_cell_fails_the_check(self):
        cell = '<td class="cell none" data-scenario="c"><a href="gateways/gw2/c.html">none</a></td>'
        edit(self.files, "index.html", cell, "")
        self.assert_fails(line_has=("index.html", "gateway gw2, scenario c: 0 cells, expected 1"))

    def test_a_cell_for_a_scenario_no_report_has_fails_the_check(self):
        cell = '<td class="cell none" data-scenario="z"><a href="gateways/gw2/c.html">none</a></td>'
        edit(self.files, "index.html", self.row("gw2"), self.row("gw2").replace("</tr>", cell + "</tr>"))
        self.assert_fails(line_has=("index.html", "gateway gw2: a cell for scenario z"))

    def test_a_cell_with_the_wrong_outcome_class_fails_the_check(self):
        edit(self.files, "index.html", '<td class="cell fail" data-scenario="a">', '<td class="cell pass" data-scenario="a">')
        self.assert_fails(line_has=("index.html", "gateway gw2, scenario a: outcome class pass, expected fail"))

    def test_a_cell_without_a_link_fails_the_check(self):
        edit(
            self.files, "index.html",
            '<td class="cell xfail" data-scenario="c"><a href="gateways/ref-gw/c.html">xfail</a></td>',
            '<td class="cell xfail" data-scenario="c">xfail</td>',
        )
        self.assert_fails(line_has=("index.html", "gateway ref-gw, scenario c: the cell has no a[href]"))

    def test_an_index_without_the_matrix_fails_the_check(self):
        edit(self.files, "index.html", 'id="gateway-matrix"', 'id="matrix"')
        self.assert_fails(line_has=("index.html", "no table#gateway-matrix"))


class NoChromium(unittest.TestCase):
    """Runs without Chromium too: the check itself must say what it tried."""

    def test_a_missing_chromium_is_a_clear_error_naming_what_was_tried(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "index.html").write_text("<!doctype html><title>x</title>")
            env = dict(os.environ, CHROMIUM="/nonexistent/chromium")
            proc = subprocess.run(
                [sys.executable, str(CHECK), tmp, "--reports", tmp],
                capture_output=True, text=True, timeout=60, env=env,
            )
            self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
            self.assertIn("CHROMIUM='/nonexistent/chromium' is not an executable", proc.stderr)
            env = dict(os.environ, PATH=tmp)
            env.pop("CHROMIUM", None)
            proc = subprocess.run(
                [sys.executable, str(CHECK), tmp, "--reports", tmp],
                capture_output=True, text=True, timeout=60, env=env,
            )
            self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
            self.assertIn("no Chromium found: tried env CHROMIUM (unset) and chromium, chromium-browser, google-chrome", proc.stderr)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Render every page of the static report site in headless Chromium and check it.

    python3 gpu_runner/site/browser_check.py SITE_DIR --reports REPORTS_DIR [--screenshot OUT.png]

SITE_DIR is what `gpu-runner report --html SITE_DIR` wrote; REPORTS_DIR holds
the JSON reports it was built from (golden/gateway/reports). One Chromium
process (env CHROMIUM, else chromium, chromium-browser or google-chrome on
PATH) is driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
JSON messages ended by a NUL byte, commands on the browser's fd 3, answers and
events on its fd 4). Every *.html file under SITE_DIR is opened, one after the
other, from its file:// URL; a page must fire its load event within 15 s.

What a page must satisfy (every failure is collected, named by the page's path
relative to SITE_DIR):

* No console errors: no uncaught exception, no console.error or failed
  console.assert, no browser log entry of level "error" (a resource that did
  not load is one).
* Every link resolves. The targets of a[href], img[src], link[href],
  script[src], iframe[src], object[data] and source[src] that are relative or
  file:// must be files inside SITE_DIR (the query string ignored; a directory
  must hold an index.html). A #fragment, on the same page or another page of
  the site, must name an element id on that page. http(s):// is allowed only
  as a plain link out (a[href]): the site loads nothing from the network when
  it is viewed. mailto: and data: are allowed; javascript: and any other
  scheme are not.
* The gateway matrix of index.html, table#gateway-matrix, against an oracle
  computed here from REPORTS_DIR, never from the site: the gateways are the
  `gateway` fields of the top-level JSON objects with a `results` key (the
  gateway reports), files ending in -instruct.json left out; the scenarios
  are the union of their results[].scenario. The matrix has exactly one
  `tbody tr.gateway[data-gateway=NAME]` per gateway and no other, its first
  row also has class `reference`, and each row has exactly one
  `td.cell[data-scenario=S]` per scenario and no other, holding an a[href],
  whose class tells the report's outcome: pass -> `pass`, fail -> `fail`,
  expected failure -> `xfail`, skip -> `skip`, drift -> `drift`, a scenario
  the gateway's report lacks -> `none`.

With --screenshot, index.html is then loaded again in a 1400x1000 viewport
and captured as a PNG (whether or not the checks passed, so a failing run
still shows what it saw).

Exit status: 0 and a one-line summary when every check passes; 1 and every
failure (the first 50 lines, then a count) otherwise; 2 when the check could
not run (no Chromium, a Chromium that does not start, a bad argument).
Chromium's own stderr is shown only when it fails to start or dies.

Self-tests: python3 gpu_runner/site/test_browser_check.py
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

LOAD_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 30.0
MAX_FAILURE_LINES = 50
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")

# The report's outcome -> the class its matrix cell carries.
OUTCOME_CLASS = {
    "pass": "pass",
    "fail": "fail",
    "expected failure": "xfail",
    "skip": "skip",
    "drift": "drift",
}
NO_RESULT_CLASS = "none"
OUTCOME_CLASSES = set(OUTCOME_CLASS.values()) | {NO_RESULT_CLASS}

# (tag, attribute) of every element whose URL is checked.
LINK_ATTRS = (
    ("a", "href"),
    ("img", "src"),
    ("link", "href"),
    ("script", "src"),
    ("iframe", "src"),
    ("object", "data"),
    ("source", "src"),
)

# Runs in each page after its load event (after a forced layout, so that
# what the CSS asks for is requested, and one more task, so that errors
# thrown by code the load event scheduled are seen): every link with its
# resolved URL, and every element id.
COLLECT_JS = """
(async () => {
  void document.documentElement.offsetHeight;  // style and layout: what CSS loads is requested now
  await new Promise(r => setTimeout(r, 0));
  const links = [];
  for (const [tag, attr] of %s) {
    for (const el of document.querySelectorAll(`${tag}[${attr}]`)) {
      const raw = el.getAttribute(attr);
      let resolved = null;
      try { resolved = new URL(raw, document.baseURI).href; } catch (e) {}
      links.push([tag, attr, raw, resolved]);
    }
  }
  const ids = Array.from(document.querySelectorAll('[id]'), e => e.id);
  return {links, ids};
})()
""" % json.dumps([list(p) for p in LINK_ATTRS])

# Runs on index.html: the matrix as the browser parsed it.
MATRIX_JS = """
(() => {
  const t = document.querySelector('table#gateway-matrix');
  if (!t) return null;
  return Array.from(t.querySelectorAll('tbody tr.gateway'), tr => ({
    gateway: tr.getAttribute('data-gateway'),
    classes: Array.from(tr.classList),
    cells: Array.from(tr.querySelectorAll(':scope > td.cell'), td => ({
      scenario: td.getAttribute('data-scenario'),
      classes: Array.from(td.classList),
      hrefs: Array.from(td.querySelectorAll('a[href]'), a => a.getAttribute('href')),
    })),
  }));
})()
"""


class SetupError(Exception):
    """The check could not run (exit status 2)."""


# --------------------------------------------------------------------------
# Chromium over the DevTools pipe


def find_chromium() -> str:
    """The browser binary: env CHROMIUM, else the first of BROWSER_NAMES on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        path = shutil.which(env)
        if path is None:
            raise SetupError(f"CHROMIUM={env!r} is not an executable (set it to a Chromium binary, or unset it)")
        return path
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise SetupError(
        "no Chromium found: tried env CHROMIUM (unset) and "
        + ", ".join(BROWSER_NAMES)
        + " on PATH (Debian: apt-get install --no-install-recommends chromium)"
    )


class Browser:
    """One Chromium process and one page target, spoken to over the pipe."""

    def __init__(self, binary: str):
        self.binary = binary
        self.profile = tempfile.mkdtemp(prefix="site-browser-check-")
        self.stderr = tempfile.TemporaryFile()
        self.proc: subprocess.Popen | None = None
        self.next_id = 0
        self.buf = b""
        self.session: str | None = None
        self.events: list[dict] = []  # events not yet consumed by a wait
        self.on_event = None  # callback for every event, as it arrives

    # -- process

    def start(self) -> None:
        # Our end writes to cmd_w, Chromium reads cmd_r as its fd 3; Chromium
        # writes resp_w as its fd 4, we read resp_r.
        cmd_r, cmd_w = os.pipe()
        resp_r, resp_w = os.pipe()

        def child_fds():
            # Move the two ends out of the way first (one may already be 3
            # or 4), then onto 3 and 4; dup2 makes them inheritable.
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(resp_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [
            self.binary,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            # Nothing of the browser's own goes to the network either.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            # Containers often have a small /dev/shm.
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
            f"--user-data-dir={self.profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        try:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=self.stderr,
                stderr=self.stderr,
                pass_fds=(3, 4),
                preexec_fn=child_fds,
                # Its own process group: the renderers and zygotes go with it.
                start_new_session=True,
            )
        except OSError as e:
            raise SetupError(f"{self.binary} did not start: {e}") from e
        finally:
            os.close(cmd_r)
            os.close(resp_w)
        self.wfd, self.rfd = cmd_w, resp_r

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace").strip()

    def close(self) -> None:
        """Stop Chromium and everything it started; remove its profile."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                self.send("Browser.close")
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for fd in ("wfd", "rfd"):
            if hasattr(self, fd):
                try:
                    os.close(getattr(self, fd))
                except OSError:
                    pass
                delattr(self, fd)
        self.proc = None
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- messages

    def send(self, method: str, params: dict | None = None, session: bool = True) -> int:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self.wfd, data)
            data = data[n:]
        return self.next_id

    def _read_message(self, deadline: float) -> dict | None:
        """The next message, or None at the deadline."""
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.rfd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                code = self.proc.poll() if self.proc else None
                raise SetupError(
                    f"{self.binary} closed the DevTools pipe (exit status {code})"
                    + (f"; its stderr:\n{self.stderr_text()}" if self.stderr_text() else "")
                )
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def _dispatch(self, msg: dict) -> None:
        if self.on_event is not None:
            self.on_event(msg)
        self.events.append(msg)

    def call(self, method: str, params: dict | None = None, session: bool = True,
             timeout: float = COMMAND_TIMEOUT_S) -> dict:
        """Send a command and wait for its answer; events met meanwhile are kept."""
        mid = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(deadline)
            if msg is None:
                raise SetupError(f"no answer to {method} within {timeout:.0f} s")
            if msg.get("id") == mid:
                if "error" in msg:
                    raise SetupError(f"{method} failed: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self._dispatch(msg)

    def wait_event(self, method: str, timeout: float) -> dict | None:
        """The first event `method` of our session not yet consumed, or None at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and ev.get("sessionId") == self.session:
                    del self.events[: i + 1]
                    return ev
            self.events.clear()
            msg = self._read_message(deadline)
            if msg is None:
                return None
            if "method" in msg:
                self._dispatch(msg)

    def open_page(self) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, session=False
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        # Every http(s) request is paused, reported and failed at once: the
        # site must load nothing from the network, and a check must not
        # wait on one (this also catches what the link scan cannot see,
        # such as a CSS url() or @import).
        self.call("Fetch.enable", {"patterns": [{"urlPattern": "http://*"}, {"urlPattern": "https://*"}]})

    def navigate(self, url: str, timeout: float = LOAD_TIMEOUT_S) -> str | None:
        """Load url and wait for its load event; a failure as text, or None."""
        self.events.clear()
        deadline = time.monotonic() + timeout
        res = self.call("Page.navigate", {"url": url}, timeout=timeout)
        error = res.get("errorText")
        ev = self.wait_event("Page.loadEventFired", max(0.0, deadline - time.monotonic()))
        if error:
            return f"navigation failed: {error}"
        if ev is None:
            return f"no load event within {timeout:.0f} s"
        return None

    def evaluate(self, expression: str):
        res = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in res:
            raise SetupError(f"the check's own script failed: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")


# --------------------------------------------------------------------------
# The oracle: what the matrix must show, from the JSON reports


def expected_matrix(reports_dir: Path):
    """(gateways in file order, sorted scenarios, {gateway: {scenario: class}})."""
    gateways: dict[str, dict[str, str]] = {}
    sources: dict[str, str] = {}
    for path in sorted(reports_dir.glob("*.json")):
        if path.name.endswith("-instruct.json"):
            continue
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SetupError(f"{path}: not a JSON report: {e}") from e
        if not isinstance(report, dict) or "results" not in report:
            continue
        name = report.get("gateway")
        if not isinstance(name, str) or not name:
            raise SetupError(f"{path}: a gateway report without a `gateway` name")
        if name in gateways:
            raise SetupError(f"{path}: gateway {name} already reported by {sources[name]}")
        sources[name] = path.name
        cells: dict[str, str] = {}
        for r in report["results"]:
            outcome = r.get("outcome")
            if outcome not in OUTCOME_CLASS:
                raise SetupError(f"{path}: scenario {r.get('scenario')}: unknown outcome {outcome!r}")
            cells[r["scenario"]] = OUTCOME_CLASS[outcome]
        gateways[name] = cells
    if not gateways:
        raise SetupError(f"{reports_dir}: no gateway reports (JSON objects with `results`)")
    scenarios = sorted({s for cells in gateways.values() for s in cells})
    return list(gateways), scenarios, gateways


def check_matrix(rows, reports_dir: Path, failures: list[str]) -> int:
    """Compare the matrix the browser saw with the oracle; returns the rows checked."""
    where = "index.html: matrix"
    if rows is None:
        failures.append(f"{where}: no table#gateway-matrix")
        return 0
    names, scenarios, expected = expected_matrix(reports_dir)
    if not rows:
        failures.append(f"{where}: no `tbody tr.gateway` rows (expected {', '.join(names)})")
        return 0
    if "reference" not in rows[0]["classes"]:
        failures.append(
            f"{where}: the first row (gateway {rows[0]['gateway']}) lacks class `reference`"
        )
    seen: dict[str, int] = {}
    for row in rows:
        gw = row["gateway"]
        if gw is None:
            failures.append(f"{where}: a tr.gateway row without data-gateway")
            continue
        seen[gw] = seen.get(gw, 0) + 1
        if gw not in expected:
            failures.append(f"{where}: row for gateway {gw}, which no gateway report names")
    for gw in names:
        n = seen.get(gw, 0)
        if n == 0:
            failures.append(f"{where}: no row for gateway {gw}")
        elif n > 1:
            failures.append(f"{where}: {n} rows for gateway {gw}")
    for row in rows:
        gw = row["gateway"]
        if gw not in expected or seen.get(gw) != 1:
            continue
        by_scenario: dict[str, list] = {}
        for cell in row["cells"]:
            by_scenario.setdefault(cell["scenario"], []).append(cell)
        for s in by_scenario:
            if s not in scenarios:
                failures.append(f"{where}: gateway {gw}: a cell for scenario {s}, which no gateway report has")
        for s in scenarios:
            cells = by_scenario.get(s, [])
            if len(cells) != 1:
                failures.append(f"{where}: gateway {gw}, scenario {s}: {len(cells)} cells, expected 1")
                continue
            cell = cells[0]
            if not cell["hrefs"]:
                failures.append(f"{where}: gateway {gw}, scenario {s}: the cell has no a[href]")
            want = expected[gw].get(s, NO_RESULT_CLASS)
            got = sorted(set(cell["classes"]) & OUTCOME_CLASSES)
            if got != [want]:
                failures.append(
                    f"{where}: gateway {gw}, scenario {s}: outcome class "
                    f"{' '.join(got) or '(none of ' + ', '.join(sorted(OUTCOME_CLASSES)) + ')'}, "
                    f"expected {want}"
                )
    return len(rows)


# --------------------------------------------------------------------------
# Links


def describe(tag: str, attr: str, raw: str) -> str:
    return f'<{tag} {attr}="{raw}">'


def check_link(site: Path, page: str, tag: str, attr: str, raw: str, resolved: str | None,
               failures: list[str], fragments: list) -> None:
    """One link of one page; fragment checks are queued in `fragments`."""
    what = describe(tag, attr, raw)
    if resolved is None:
        failures.append(f"{page}: {what}: not a URL")
        return
    url = urllib.parse.urlsplit(resolved)
    scheme = url.scheme.lower()
    if scheme in ("http", "https"):
        if tag != "a":
            failures.append(
                f"{page}: {what}: loads from the network (the site loads nothing from the network at view time)"
            )
        return
    if scheme in ("mailto", "data"):
        return
    if scheme != "file":
        failures.append(f"{page}: {what}: {scheme}: links are not allowed")
        return
    if url.netloc not in ("", "localhost"):
        failures.append(f"{page}: {what}: a file URL on host {url.netloc}")
        return
    target = Path(urllib.request.url2pathname(url.path))
    try:
        rel = target.resolve().relative_to(site)
    except ValueError:
        failures.append(f"{page}: {what}: points outside the site ({target})")
        return
    full = site / rel
    if full.is_dir():
        full = full / "index.html"
        rel = rel / "index.html"
        if not full.is_file():
            failures.append(f"{page}: {what}: a directory without index.html")
            return
    elif not full.is_file():
        failures.append(f"{page}: {what}: no such file {rel.as_posix()}")
        return
    fragment = urllib.parse.unquote(url.fragment)
    if fragment and full.suffix == ".html":
        fragments.append((page, what, rel.as_posix(), fragment))


# --------------------------------------------------------------------------


def run(site: Path, reports: Path, screenshot: Path | None) -> int:
    site = site.resolve()
    if not (site / "index.html").is_file():
        raise SetupError(f"{site}: no index.html")
    if not reports.is_dir():
        raise SetupError(f"{reports}: not a directory")
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.is_file())
    failures: list[str] = []
    fragments: list = []
    ids: dict[str, set] = {}
    links = 0
    rows = 0
    current = [""]  # the page being visited
    blocked = [0]  # network requests it made
    context_page: dict[int, str] = {}  # execution context id -> the page it belongs to

    def on_event(msg: dict) -> None:
        method = msg.get("method")
        p = msg.get("params", {})
        if method == "Runtime.executionContextCreated":
            context_page[p["context"]["id"]] = current[0]
            return
        if method == "Fetch.requestPaused":
            browser.send("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "BlockedByClient"})
            if current[0]:  # (the screenshot's second look at index.html repeats nothing)
                blocked[0] += 1
                failures.append(
                    f"{current[0]}: requested {p.get('request', {}).get('url')} from the network "
                    "(the site loads nothing from the network at view time)"
                )
            return
        if method == "Runtime.exceptionThrown":
            page = context_page.get(p.get("exceptionDetails", {}).get("executionContextId"), current[0])
        elif method == "Runtime.consoleAPICalled":
            page = context_page.get(p.get("executionContextId"), current[0])
        else:
            page = current[0]
        if not page:
            return  # about:blank, or the screenshot's second look
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = (d.get("exception") or {}).get("description") or d.get("text", "")
            text = text.splitlines()[0] if text else "(no text)"
            failures.append(f"{page}: uncaught exception: {text}{location(d)}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(
                str(a.get("value", a.get("description", a.get("type")))) for a in p.get("args", [])
            )
            failures.append(f"{page}: console.{p['type']}: {args}")
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                url = e.get("url")
                failures.append(
                    f"{page}: browser log error ({e.get('source')}): {e.get('text')}"
                    + (f" [{short_url(site, url)}]" if url else "")
                )

    binary = find_chromium()
    browser = Browser(binary)
    started = time.monotonic()
    try:
        browser.start()
        try:
            browser.open_page()
        except SetupError as e:
            err = browser.stderr_text()
            raise SetupError(f"{binary} did not come up: {e}" + (f"\nits stderr:\n{err}" if err else "")) from e
        browser.on_event = on_event
        matrix = None
        for page in pages:
            current[0] = page
            problem = browser.navigate((site / page).as_uri())
            if problem:
                failures.append(f"{page}: {problem}")
                continue
            found = browser.evaluate(COLLECT_JS)
            ids[page] = set(found["ids"])
            for tag, attr, raw, resolved in found["links"]:
                links += 1
                check_link(site, page, tag, attr, raw, resolved, failures, fragments)
            if page == "index.html":
                matrix = browser.evaluate(MATRIX_JS)
            if blocked[0]:
                # A barrier, on a page that asked the network for something
                # only: the browser log's word on the failed request may come
                # after the load event; it comes before about:blank's.
                blocked[0] = 0
                problem = browser.navigate("about:blank")
                if problem:
                    failures.append(f"{page}: leaving the page: {problem}")
        current[0] = ""
        if "index.html" in ids:
            rows = check_matrix(matrix, reports, failures)
        for page, what, target, fragment in fragments:
            if target not in ids:
                failures.append(f"{page}: {what}: #{fragment}: {target} was not loaded")
            elif fragment not in ids[target]:
                failures.append(f"{page}: {what}: no element id {fragment!r} on {target}")
        seconds = time.monotonic() - started
        if screenshot is not None:
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
            problem = browser.navigate((site / "index.html").as_uri())
            if problem:
                failures.append(f"index.html: screenshot: {problem}")
            else:
                data = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(data))
                print(f"screenshot: {screenshot}")
    finally:
        browser.close()

    if failures:
        print(f"browser check: {len(failures)} failure(s) on {len(pages)} page(s) of {site}")
        for line in failures[:MAX_FAILURE_LINES]:
            print(f"  {line}")
        if len(failures) > MAX_FAILURE_LINES:
            print(f"  ... and {len(failures) - MAX_FAILURE_LINES} more")
        return 1
    rate = len(pages) / seconds if seconds > 0 else 0.0
    print(
        f"browser check: {len(pages)} pages, {links} links checked, {rows} matrix rows, "
        f"no console errors ({seconds:.1f} s, {rate:.0f} pages/s, {Path(binary).name})"
    )
    return 0


def location(details: dict) -> str:
    url = details.get("url")
    if not url:
        return ""
    return f" ({url.rsplit('/', 1)[-1]}:{details.get('lineNumber', 0) + 1})"


def short_url(site: Path, url: str) -> str:
    prefix = site.as_uri() + "/"
    return url[len(prefix):] if url.startswith(prefix) else url


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Render every page of the report site in headless Chromium and check it.")
    ap.add_argument("site", type=Path, help="the site's directory (gpu-runner report --html DIR)")
    ap.add_argument("--reports", type=Path, required=True,
                    help="the JSON reports the site was built from (golden/gateway/reports)")
    ap.add_argument("--screenshot", type=Path, help="write a PNG of index.html at 1400x1000")
    args = ap.parse_args(argv)
    # SIGTERM (a CI timeout) still stops Chromium: the finally blocks run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run(args.site, args.reports, args.screenshot)
    except SetupError as e:
        print(f"browser check: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

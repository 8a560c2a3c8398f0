#!/usr/bin/env python3
"""Tests of bench/insn_check.py's comparison, without valgrind:
`python3 bench/test_insn_check.py` from the repository root. The measured
counts come from a file (`--measured`), as the baseline does."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import insn_check  # noqa: E402

MEASURED = ("# rustc 1.95.0 (test)\n"
            "request/prompt_512_tokens tenc 8338\n"
            "output/batch_64 hot 41841\n")


def run(baseline_text, measured_text=MEASURED, *extra):
    with tempfile.TemporaryDirectory() as d:
        base, meas = os.path.join(d, "baseline.txt"), os.path.join(d, "measured.txt")
        open(base, "w").write(baseline_text)
        open(meas, "w").write(measured_text)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = insn_check.main(["--baseline", base, "--measured", meas, *extra])
        return rc, out.getvalue(), err.getvalue(), base


class InstructionBaseline(unittest.TestCase):
    def test_counts_equal_to_the_baseline_pass(self):
        rc, out, err, _ = run(MEASURED)
        self.assertEqual(rc, 0, err)
        self.assertIn("request/prompt_512_tokens tenc: 8,338 instructions per call", out)

    def test_a_baseline_with_a_lower_count_fails_naming_the_file_the_path_and_both_figures(self):
        rc, _, err, base = run("request/prompt_512_tokens tenc 8000\noutput/batch_64 hot 41841\n")
        self.assertEqual(rc, 1)
        self.assertIn(f"regression: {base}: request/prompt_512_tokens tenc: 8,338 instructions per call, "
                      "baseline 8,000 (+4.2%, tolerance +3%)", err)
        self.assertNotIn("batch_64", err)

    def test_a_rise_within_the_tolerance_passes(self):
        rc, _, err, _ = run("request/prompt_512_tokens tenc 8200\noutput/batch_64 hot 41841\n")
        self.assertEqual(rc, 0, err)

    def test_a_tighter_tolerance_fails_the_same_rise(self):
        rc, _, err, _ = run("request/prompt_512_tokens tenc 8200\noutput/batch_64 hot 41841\n",
                            MEASURED, "--tolerance", "1")
        self.assertEqual(rc, 1)
        self.assertIn("(+1.7%, tolerance +1%)", err)

    def test_a_faster_path_passes_and_asks_for_a_new_baseline(self):
        rc, _, err, _ = run("request/prompt_512_tokens tenc 12264\noutput/batch_64 hot 41841\n")
        self.assertEqual(rc, 0)
        self.assertIn("(-32.0%, tolerance +3%): faster; record the new baseline", err)

    def test_a_path_of_the_baseline_not_measured_fails(self):
        rc, _, err, base = run(MEASURED + "output/batch_256 tenc 78378\n")
        self.assertEqual(rc, 1)
        self.assertIn(f"{base}: output/batch_256 tenc: not measured", err)

    def test_a_malformed_baseline_line_is_an_error_naming_its_line(self):
        rc, _, err, base = run("request/prompt_512_tokens tenc lots\n")
        self.assertEqual(rc, 2)
        self.assertIn(f"{base}:1: expected `<case> <path> <instructions>`", err)

    def test_a_missing_baseline_file_is_an_error_naming_it(self):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = insn_check.main(["--baseline", "/nonexistent/insn-baseline.txt", "--measured", "/dev/null"])
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/insn-baseline.txt", err.getvalue())

    def test_the_committed_baseline_covers_every_path_the_check_measures(self):
        baseline, rustc = insn_check.read_counts(insn_check.BASELINE)
        self.assertEqual(sorted(baseline), sorted(insn_check.PATHS))
        self.assertTrue(rustc and rustc.startswith("rustc "), rustc)


if __name__ == "__main__":
    unittest.main()

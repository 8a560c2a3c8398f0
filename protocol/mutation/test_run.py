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

    def test_the_quick_pass_skips_the_slow_targets_tests_including_proptest_ones(self):
        with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False) as f:
            f.write("#[test]\n#[ignore]\nfn ignored_one() {}\n\nproptest! {\n"
                    "    #[test]\n    fn prop(x in 0u8..) {}\n\n    fn prop_two(x in 0u8..) {}\n}\nfn helper() {}\n")
        self.assertEqual(run.test_names(f.name), ["ignored_one", "prop", "prop_two"])
        os.unlink(f.name)
        quick = run.quick_test_args()
        self.assertEqual(quick[:3], ["--lib", "--tests", "--"])
        self.assertIn("truncated_and_mutated_golden_messages_never_panic", quick)
        self.assertTrue(set(run.test_args()) < set(quick), "the quick pass skips what every pass skips, and more")

    def test_a_quick_first_runs_second_pass_decides_the_mutants_it_reran(self):
        d = tempfile.mkdtemp()
        f = "protocol/src/validate.rs"
        for sub, outs in (("quick", [("m1", "MissedMutant"), ("m2", "CaughtMutant"), ("m3", "MissedMutant")]),
                          ("every-test", [("m1", "CaughtMutant"), ("m3", "MissedMutant")])):
            os.makedirs(os.path.join(d, sub, "mutants.out"))
            with open(os.path.join(d, sub, "mutants.out", "outcomes.json"), "w") as out:
                json.dump({"outcomes": [{"scenario": {"Mutant": {"name": n, "file": f}}, "summary": s}
                                        for n, s in outs]}, out)
        self.assertEqual(run.outcomes([d]), {"m1": (f, "CaughtMutant"), "m2": (f, "CaughtMutant"),
                                             "m3": (f, "MissedMutant")})

    def test_a_resumed_pass_keeps_what_was_judged_and_its_later_runs_decide_again(self):
        d = tempfile.mkdtemp()
        f = "protocol/src/validate.rs"

        def write(sub, outs):
            os.makedirs(os.path.join(d, sub, "mutants.out"), exist_ok=True)
            with open(os.path.join(d, sub, "mutants.out", "outcomes.json"), "w") as out:
                json.dump({"outcomes": [{"scenario": {"Mutant": {"name": n, "file": f}}, "summary": s}
                                        for n, s in outs]}, out)
        write("quick", [("m1", "CaughtMutant"), ("m2", "Timeout")])
        quick = os.path.join(d, "quick")
        self.assertEqual(sorted(run.resume(quick)), ["m1", "m2"])
        self.assertFalse(os.path.exists(os.path.join(quick, "mutants.out")), "moved to earlier-1")
        write("quick", [("m3", "MissedMutant")])
        self.assertEqual(sorted(run.resume(quick)), ["m1", "m2", "m3"])
        write("quick", [("m2", "CaughtMutant")])
        self.assertEqual([os.path.relpath(p, quick) for p in run.parts(quick)],
                         ["earlier-1/mutants.out/outcomes.json", "earlier-2/mutants.out/outcomes.json",
                          "mutants.out/outcomes.json"])
        self.assertEqual(run.outcomes([d]), {"m1": (f, "CaughtMutant"), "m2": (f, "CaughtMutant"),
                                             "m3": (f, "MissedMutant")})

    def test_a_run_again_leaves_out_what_was_judged_at_every_position_it_names(self):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "mutants.out"))
        f = "protocol/src/validate.rs"
        outs = [(f"{f}:1:1: replace a", "CaughtMutant"), (f"{f}:2:1: replace b", "MissedMutant"),
                (f"{f}:3:1: replace c", "CaughtMutant"), (f"{f}:9:1: replace c", "MissedMutant"),
                (f"{f}:4:1: replace d", "Unviable"), (f"{f}:5:1: replace e", "Timeout")]
        with open(os.path.join(d, "mutants.out", "outcomes.json"), "w") as out:
            json.dump({"outcomes": [{"scenario": {"Mutant": {"name": n, "file": f}}, "summary": s}
                                    for n, s in outs]}, out)
        self.assertEqual(run.judged_before([d]), [f"{f}: replace a", f"{f}: replace d", f"{f}: replace e"])
        self.assertEqual(run.judged_before(None), [])

    def test_a_pass_leaves_out_by_exact_name_what_was_judged_done_or_not_asked_for(self):
        f = "protocol/src/translate/request/build.rs"
        current = [f"{f}:84:9: delete field n from struct SamplingParams expression in build",
                   f"{f}:75:36: replace < with <= in build", f"{f}:80:34: replace > with >= in build",
                   f"{f}:90:1: replace a", f"{f}:91:1: replace b"]
        # Judged before, named without position: left out at the line the code has now.
        judged = [f"{f}: delete field n from struct SamplingParams expression in build", f"{f}: replace gone"]
        self.assertEqual(run.skipped(current, judged),
                         [f"{f}:84:9: delete field n from struct SamplingParams expression in build"])
        # A resumed pass: what it judged, by exact name.
        self.assertEqual(run.skipped(current, [], done=[f"{f}:90:1: replace a", f"{f}:1:1: replace a"]),
                         [f"{f}:90:1: replace a"])
        # A second pass: every mutant but the ones it is asked to run again.
        self.assertEqual(run.skipped(current, [], only={f"{f}:75:36: replace < with <= in build"}),
                         [n for n in current if n != f"{f}:75:36: replace < with <= in build"])

    def test_a_second_pass_runs_every_mutant_its_shard_or_sample_missed_without_splitting_them_again(self):
        import argparse
        shard = argparse.Namespace(shard="3/12", sample=None)
        sample = argparse.Namespace(shard=None, sample=2)
        self.assertEqual(run.shard_args(shard), ["--shard", "3/12", "--sharding", "round-robin"])
        self.assertEqual(run.shard_args(sample), ["--shard", "1/2", "--sharding", "round-robin"])
        self.assertEqual(run.shard_args(argparse.Namespace(shard=None, sample=None)), [])
        self.assertEqual(run.shard_args(shard, only={"m"}), [])
        self.assertEqual(run.shard_args(sample, only={"m"}), [])

    def test_a_record_replaces_the_modules_measured_and_keeps_the_others(self):
        path = os.path.join(tempfile.mkdtemp(), "scores.json")
        f = "protocol/src/translate/finish.rs"
        rows, missed = run.score_rows({f"{f}:1:1: a": (f, "CaughtMutant"), f"{f}:2:1: b": (f, "MissedMutant")})
        run.record(path, rows, missed, "2026-12-06")
        v = "protocol/src/validate.rs"
        rows, missed = run.score_rows({f"{v}:1:1: c": (v, "CaughtMutant")})
        run.record(path, rows, missed, "2026-12-07")
        with open(path) as out:
            doc = json.load(out)
        by = {m["module"]: m for m in doc["modules"]}
        self.assertEqual(list(by), list(run.MODULES), "every module, in the modules' order")
        self.assertEqual((by["translate/finish"]["score"], by["translate/finish"]["measured"]), (50.0, "2026-12-06"))
        self.assertEqual(by["translate/finish"]["missed_mutants"], [f"{f}:2:1: b"])
        self.assertEqual((by["validate"]["score"], by["validate"]["measured"]), (100.0, "2026-12-07"))
        self.assertEqual(by["decode"], {"module": "decode", "measured": None})
        self.assertNotIn("sample", by["validate"])
        d = "protocol/src/decode/mod.rs"
        rows, missed = run.score_rows({f"{d}:1:1: e": (d, "CaughtMutant")})
        run.record(path, rows, missed, "2026-12-07", sample=2)
        with open(path) as out:
            by = {m["module"]: m for m in json.load(out)["modules"]}
        self.assertEqual((by["decode"]["score"], by["decode"]["sample"]), (100.0, 2), "a sample says so")

    def test_a_run_again_decides_anew_what_it_ran_wherever_the_code_moved_it(self):
        f = "protocol/src/validate.rs"

        def run_dir(outs, again=None):
            d = tempfile.mkdtemp()
            os.makedirs(os.path.join(d, "mutants.out"))
            with open(os.path.join(d, "mutants.out", "outcomes.json"), "w") as out:
                json.dump({"outcomes": [{"scenario": {"Mutant": {"name": n, "file": f}}, "summary": s}
                                        for n, s in outs]}, out)
            if again:
                with open(os.path.join(d, "again.json"), "w") as out:
                    json.dump(again, out)
            return d
        first = run_dir([(f"{f}:1:1: replace a", "CaughtMutant"), (f"{f}:2:1: replace b", "MissedMutant"),
                         (f"{f}:3:1: replace c", "MissedMutant")])
        # New tests moved `b` to line 7 and killed it; `c` is still missed;
        # `d`'s code was removed.
        first_d = run_dir([(f"{f}:4:1: replace d", "MissedMutant")])
        again = run_dir([(f"{f}:7:1: replace b", "CaughtMutant"), (f"{f}:8:1: replace c", "MissedMutant")],
                        {"again": [first, first_d],
                         "current": [f"{f}: replace a", f"{f}: replace b", f"{f}: replace c"]})
        # A run of another module is not the again run's to judge.
        other = "protocol/src/translate/finish.rs"
        finish = tempfile.mkdtemp()
        os.makedirs(os.path.join(finish, "mutants.out"))
        with open(os.path.join(finish, "mutants.out", "outcomes.json"), "w") as out:
            json.dump({"outcomes": [{"scenario": {"Mutant": {"name": f"{other}:1:1: replace z", "file": other}},
                                     "summary": "CaughtMutant"}]}, out)
        self.assertIn(f"{other}:1:1: replace z", run.outcomes([again, first, finish]))
        self.assertEqual(run.outcomes([again, first, first_d]), {
            f"{f}:1:1: replace a": (f, "CaughtMutant"),
            f"{f}:7:1: replace b": (f, "CaughtMutant"),
            f"{f}:8:1: replace c": (f, "MissedMutant"),
        })

    def test_a_mutant_listed_equivalent_since_the_run_is_left_out_of_its_score(self):
        name, _ = next(iter(run.equivalents().items()))
        file, _, rest = name.partition(": ")
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "mutants.out"))
        with open(os.path.join(d, "mutants.out", "outcomes.json"), "w") as out:
            json.dump({"outcomes": [{"scenario": {"Mutant": {"name": f"{file}:5:5: {rest}", "file": file}},
                                     "summary": "MissedMutant"}]}, out)
        self.assertEqual(run.outcomes([d]), {})

    def test_a_directory_holding_no_run_is_refused_rather_than_scored_empty(self):
        with self.assertRaises(SystemExit) as e:
            run.outcomes([tempfile.mkdtemp()])
        self.assertIn("no mutants.out/outcomes.json", str(e.exception))

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
            record = None
            measured = None
        self.assertEqual(run.cmd_score(A), 1)
        A.min = 50.0
        self.assertEqual(run.cmd_score(A), 0)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Tests of bench/msgspec_compare.py's parsing and table, without vLLM:
`python3 bench/test_msgspec_compare.py` from the repository root. The vLLM
Rust client codec is played by bench/testdata/fake-vllm-rust.sh."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import msgspec_compare as mc  # noqa: E402

GOLDEN = os.path.join(HERE, "..", "golden")


class BenchLines(unittest.TestCase):
    def test_lines_with_and_without_the_fast_column_parse_by_case(self):
        text = ("conformance bench: allocator mimalloc\n"
                "vllm/0.33.0/output/batch_64 decode_ns=9805 encode_ns=3064 fast_decode_ns=2100\n"
                "vllm/0.33.0/request/prompt_512_tokens decode_ns=1912 encode_ns=1202\n")
        got = mc.by_case(mc.parse_bench_lines(text))
        self.assertEqual(got["output/batch_64"], {"decode_ns": 9805, "encode_ns": 3064, "fast_decode_ns": 2100})
        self.assertEqual(got["request/prompt_512_tokens"], {"decode_ns": 1912, "encode_ns": 1202})
        self.assertNotIn("output/batch_256", got)

    def test_a_suffix_match_needs_a_whole_path_segment(self):
        self.assertTrue(mc.match_case("vllm/0.33.0/output/batch_64", "output/batch_64"))
        self.assertFalse(mc.match_case("vllm/0.33.0/output/xbatch_64", "output/batch_64"))

    def test_the_vllm_rust_stand_in_is_run_on_the_case_files_and_parsed(self):
        fake = os.path.join(HERE, "testdata", "fake-vllm-rust.sh")
        got = mc.vllm_rust_times(GOLDEN, "0.33.0", fake)
        # One line per case, in CASES order: 1000, 2000, ... ns.
        for i, (case_id, _) in enumerate(mc.CASES):
            self.assertEqual(got[case_id], {"decode_ns": 1000 * (i + 1), "encode_ns": 500 * (i + 1)})

    def test_the_tables_report_per_round_ratios_of_the_typed_path(self):
        # Two rounds; the machine is twice as fast in the second for everyone.
        def rnd(k):
            py = {c: {"decode_ns": 18000 / k, "encode_ns": 7000 / k} for c, _ in mc.CASES}
            rs = {c: {"decode_ns": 9000 / k, "encode_ns": 3500 / k, "typed_encode_ns": 2000 / k}
                  for c, _ in mc.CASES}
            rs["output/batch_64"]["fast_decode_ns"] = 3000 / k
            rs["request/prompt_512_tokens"]["typed_decode_ns"] = 4500 / k
            vr = {"output/batch_64": {"decode_ns": 6000 / k, "encode_ns": 7000 / k}}
            return {"msgspec": py, "ours": rs, "vllm-rust": vr}
        nbytes = {c: 3000 for c, _ in mc.CASES}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            mc.print_tables([rnd(1), rnd(2)], nbytes, 3, "test")
        text = out.getvalue()
        # decode: msgspec median 13,500; fast decode 2,250; 6.0x in both rounds; 3000 B / 2250 ns.
        self.assertIn("| `output/batch_64` | 3,000 | 13,500 | 2,250 | - | 6.0x (6.0x) | - | 1,333 |", text)
        # the request's typed decode is decode_typed: 18000 / 4500 = 4.0x
        self.assertIn("| `request/prompt_512_tokens` | 3,000 | 13,500 | 3,375 | - | 4.0x (4.0x) |", text)
        # a case without a typed decode has no ratio, and the lowest is over the cases that have one
        self.assertIn("| `output/batch_256` | 3,000 | 13,500 | - | - | - | - | - |", text)
        self.assertIn("lowest typed-path decode speed-up over vLLM/msgspec, mimalloc: 4.00x", text)
        self.assertIn("lowest typed-path encode speed-up over vLLM/msgspec, mimalloc: 3.50x", text)
        # vLLM's Rust client: 6000 / 3000 = 2.0x decode, 7000 / 2000 = 3.5x encode
        self.assertIn("| `output/batch_64` | 4,500 | 2,250 | 2.0x (2.0x) | 5,250 | 1,500 | 3.5x (3.5x) |", text)
        self.assertIn("| `output/batch_256` | - | - | - | - | 1,500 | - |", text)
        self.assertIn("lowest ratio over vLLM's Rust client: 2.00x (target: 2x)", text)

    def test_a_round_where_ours_is_slower_shows_as_the_lowest_ratio(self):
        fast = {"msgspec": {c: {"decode_ns": 10000, "encode_ns": 10000} for c, _ in mc.CASES},
                "ours": {c: {"decode_ns": 1, "encode_ns": 1, "fast_decode_ns": 1000, "typed_encode_ns": 1000}
                         for c, _ in mc.CASES}}
        slow = {"msgspec": {c: {"decode_ns": 10000, "encode_ns": 10000} for c, _ in mc.CASES},
                "ours": {c: {"decode_ns": 1, "encode_ns": 1, "fast_decode_ns": 5000, "typed_encode_ns": 1000}
                         for c, _ in mc.CASES}}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            mc.print_tables([fast, fast, slow], {c: 1 for c, _ in mc.CASES}, 1, "test")
        self.assertIn("10.0x (2.0x)", out.getvalue())
        self.assertIn("lowest typed-path decode speed-up over vLLM/msgspec, mimalloc: 2.00x", out.getvalue())


if __name__ == "__main__":
    unittest.main()

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

    def test_the_table_shows_the_fast_column_and_the_vllm_rust_ratios(self):
        py = {c: (18000.0, 7000.0) for c, _ in mc.CASES}
        rs = {c: {"decode_ns": 9000, "encode_ns": 3500} for c, _ in mc.CASES}
        rs["output/batch_64"]["fast_decode_ns"] = 3000
        vr = {"output/batch_64": {"decode_ns": 6000, "encode_ns": 7000}}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            mc.print_tables(py, rs, None, vr, 3, "test")
        text = out.getvalue()
        self.assertIn("| `output/batch_64` | 64 outputs, no logprobs | 9,000 | 3,000 | 18,000 | 2.0x | 6.0x |", text)
        self.assertIn("lowest fast-decode speed-up (output batches): 6.00x", text)
        self.assertIn("| `output/batch_64` | 6,000 | 9,000 | 3,000 | 0.7x, 2.0x | 7,000 | 3,500 | 2.0x |", text)
        self.assertIn("| `output/batch_256` | - |", text)


if __name__ == "__main__":
    unittest.main()

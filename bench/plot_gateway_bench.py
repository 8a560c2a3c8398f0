#!/usr/bin/env python3
"""Plots of a `gpu-runner gateway-bench --report-json` report.

Writes, into OUT_DIR (default docs/img):
  gateway-bench-latency.svg     TTFT and inter-token latency percentiles per
                                gateway (one closed-loop concurrency, --clients)
  gateway-bench-throughput.svg  tokens/s vs concurrency per gateway (closed loop)

Usage: plot_gateway_bench.py REPORT.json [OUT_DIR] [--clients N]
Needs matplotlib (the project keeps it in a venv of its own:
python3 -m venv ~/.cache/engine-conformance/venvs/plot && .../bin/pip install matplotlib).
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# SVGs that do not change when the figures do not (no dates, fixed ids).
plt.rcParams["svg.hashsalt"] = "gateway-bench"
plt.rcParams["svg.fonttype"] = "none"


def closed(points):
    return [p for p in points if p["load"]["kind"] == "closed"]


def percentile_curve(table):
    """{"p50": ms, ...} -> (quantiles in %, values), sorted by quantile."""
    items = sorted((float(k[1:]), v) for k, v in table.items())
    return [q for q, _ in items], [v for _, v in items]


def plot_latency(points, clients, out):
    at = [p for p in closed(points) if p["load"]["clients"] == clients]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((axes[0], "ttft_ms", "time to first token"), (axes[1], "itl_ms", "inter-token latency")):
        for p in at:
            qs, vs = percentile_curve(p[key])
            if vs:
                ax.plot(vs, qs, marker=".", label=p["gateway"])
        ax.set_xscale("log")
        ax.set_xlabel("ms (log)")
        ax.set_ylabel("percentile")
        ax.set_title(f"{title}, {clients} concurrent streams")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


def plot_throughput(points, out):
    by_gw = {}
    for p in closed(points):
        by_gw.setdefault(p["gateway"], []).append((p["load"]["clients"], p["tokens_per_s_median"] or 0.0))
    fig, ax = plt.subplots(figsize=(6, 4))
    for gw, xs in by_gw.items():
        xs.sort()
        ax.plot([c for c, _ in xs], [t for _, t in xs], marker="o", label=gw)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent streams (closed loop)")
    ax.set_ylabel("tokens/s (median of rounds)")
    ax.set_title("throughput vs concurrency, instant mock engine")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("out_dir", nargs="?", default="docs/img")
    ap.add_argument("--clients", type=int, default=16)
    a = ap.parse_args()
    with open(a.report) as f:
        rep = json.load(f)
    os.makedirs(a.out_dir, exist_ok=True)
    plot_latency(rep["points"], a.clients, os.path.join(a.out_dir, "gateway-bench-latency.svg"))
    plot_throughput(rep["points"], os.path.join(a.out_dir, "gateway-bench-throughput.svg"))


if __name__ == "__main__":
    main()

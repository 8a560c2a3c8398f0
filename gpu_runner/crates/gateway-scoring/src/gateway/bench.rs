//! The gateway overhead benchmark: what a load point measured, summed over
//! rounds, the per-round ratios against a reference gateway, the gateway
//! process tree's CPU time and memory, and the Markdown table
//! (docs/gateway-bench.md, written by `gpu-runner gateway-bench`).
//!
//! Facts relied on (proc(5)): `/proc/<pid>/stat` fields 14 and 15 are the
//! user and system CPU time in clock ticks (`sysconf(_SC_CLK_TCK)`), field 4
//! the parent pid; `/proc/<pid>/statm` field 2 is the resident set in
//! pages. The command after field 2 is in parentheses and may hold spaces,
//! so fields are counted after the last `)`.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::loadgen::Outcomes;

/// Latencies are recorded in microseconds, 1 µs to 10 min, 3 digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| Histogram::new(3).expect("3 sigfigs is valid"))
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 600_000_000)
}

/// A load point: closed loop with `clients`, or open loop at `rate`/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadPoint {
    Closed { clients: usize },
    Open { rate: f64 },
}

impl LoadPoint {
    pub fn label(&self) -> String {
        match self {
            LoadPoint::Closed { clients } => format!("c={clients}"),
            LoadPoint::Open { rate } => format!("open {rate}/s"),
        }
    }
}

/// Latency histograms and counts of one gateway at one load point, merged
/// over rounds.
#[derive(Debug, Clone)]
pub struct Latencies {
    pub ttft: Histogram<u64>,
    pub itl: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies { ttft: histogram(), itl: histogram() }
    }
}

impl Latencies {
    /// Records the successful requests of `o` (errors carry no latency).
    pub fn record(&mut self, o: &Outcomes) {
        for t in &o.ok {
            if let Some(f) = t.ttft {
                let _ = self.ttft.record(micros(f));
            }
            for g in &t.gaps {
                let _ = self.itl.record(micros(*g));
            }
        }
    }

    pub fn merge(&mut self, other: &Latencies) {
        let _ = self.ttft.add(&other.ttft);
        let _ = self.itl.add(&other.itl);
    }
}

/// Quantiles in milliseconds of a histogram (`None` when empty).
pub fn quantile_ms(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
}

/// The quantiles the plots draw (a CDF's y axis).
pub const CDF_QUANTILES: &[f64] = &[0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999];

/// What the gateway's process tree used during a load point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProcUse {
    pub cpu_s: f64,
    pub peak_rss_mib: f64,
}

/// One gateway at one load point in one round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundResult {
    pub round: usize,
    pub ok: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<&'static str, u64>,
    pub shed: u64,
    pub tokens: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub tokens_per_s: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub gateway: ProcUse,
    /// Outputs the mock engine sent per second during the point.
    pub mock_outputs_per_s: Option<f64>,
}

impl RoundResult {
    pub fn new(round: usize, o: &Outcomes, gateway: ProcUse, mock_outputs: Option<u64>) -> (RoundResult, Latencies) {
        let mut lat = Latencies::default();
        lat.record(o);
        let secs = o.elapsed.as_secs_f64().max(1e-9);
        // The usage chunk's count where the gateway sends one, else chunks.
        let tokens: u64 = o.ok.iter().map(|t| t.usage_tokens.unwrap_or(t.chunks)).sum();
        let mut by_kind = BTreeMap::new();
        for e in &o.errors {
            *by_kind.entry(e.kind()).or_insert(0) += 1;
        }
        let r = RoundResult {
            round,
            ok: o.ok.len() as u64,
            errors: o.errors.len() as u64,
            errors_by_kind: by_kind,
            shed: o.shed,
            tokens,
            seconds: secs,
            requests_per_s: o.ok.len() as f64 / secs,
            tokens_per_s: tokens as f64 / secs,
            ttft_p50_ms: quantile_ms(&lat.ttft, 0.5),
            ttft_p99_ms: quantile_ms(&lat.ttft, 0.99),
            itl_p50_ms: quantile_ms(&lat.itl, 0.5),
            itl_p99_ms: quantile_ms(&lat.itl, 0.99),
            gateway,
            mock_outputs_per_s: mock_outputs.map(|n| n as f64 / secs),
        };
        (r, lat)
    }
}

/// The median of `v` (`None` when empty; the mean of the middle two for an
/// even count).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// Per-round ratios `a[i] / b[i]` of rounds both have (a zero or missing
/// denominator gives no ratio).
pub fn round_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).filter(|(_, d)| **d > 0.0).map(|(n, d)| n / d).collect()
}

/// One gateway at one load point over all rounds.
#[derive(Debug, Clone, Serialize)]
pub struct PointSummary {
    pub gateway: String,
    pub load: LoadPoint,
    pub rounds: Vec<RoundResult>,
    pub ok: u64,
    pub errors: u64,
    pub requests_per_s_median: Option<f64>,
    pub tokens_per_s_median: Option<f64>,
    /// Merged over rounds.
    pub ttft_ms: BTreeMap<String, f64>,
    pub itl_ms: BTreeMap<String, f64>,
    pub cpu_ms_per_request: Option<f64>,
    pub cpu_ms_per_1k_tokens: Option<f64>,
    pub peak_rss_mib: f64,
    pub mock_outputs_per_s_max: Option<f64>,
    /// tokens/s over the reference gateway's, per round (same round).
    pub tokens_per_s_ratio_by_round: Vec<f64>,
}

impl PointSummary {
    pub fn new(gateway: &str, load: LoadPoint, rounds: Vec<RoundResult>, lat: &Latencies) -> PointSummary {
        let q = |h: &Histogram<u64>| -> BTreeMap<String, f64> {
            CDF_QUANTILES.iter().filter_map(|&p| quantile_ms(h, p).map(|v| (format!("p{}", p * 100.0), v))).collect()
        };
        let ok: u64 = rounds.iter().map(|r| r.ok).sum();
        let tokens: u64 = rounds.iter().map(|r| r.tokens).sum();
        let cpu: f64 = rounds.iter().map(|r| r.gateway.cpu_s).sum();
        let col = |f: fn(&RoundResult) -> f64| rounds.iter().map(f).collect::<Vec<_>>();
        PointSummary {
            gateway: gateway.to_string(),
            load,
            ok,
            errors: rounds.iter().map(|r| r.errors).sum(),
            requests_per_s_median: median(&col(|r| r.requests_per_s)),
            tokens_per_s_median: median(&col(|r| r.tokens_per_s)),
            ttft_ms: q(&lat.ttft),
            itl_ms: q(&lat.itl),
            cpu_ms_per_request: (ok > 0).then(|| cpu * 1000.0 / ok as f64),
            cpu_ms_per_1k_tokens: (tokens > 0).then(|| cpu * 1e6 / tokens as f64),
            peak_rss_mib: rounds.iter().map(|r| r.gateway.peak_rss_mib).fold(0.0, f64::max),
            mock_outputs_per_s_max: rounds.iter().filter_map(|r| r.mock_outputs_per_s).reduce(f64::max),
            tokens_per_s_ratio_by_round: Vec::new(),
            rounds,
        }
    }

    /// Fills the per-round ratios against `reference` (same load point).
    pub fn set_ratios(&mut self, reference: &PointSummary) {
        let mine: Vec<f64> = self.rounds.iter().map(|r| r.tokens_per_s).collect();
        let theirs: Vec<f64> = reference.rounds.iter().map(|r| r.tokens_per_s).collect();
        self.tokens_per_s_ratio_by_round = round_ratios(&mine, &theirs);
    }
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

/// The Markdown table of every gateway at every load point.
pub fn markdown_table(points: &[PointSummary], reference: &str) -> String {
    let mut s = format!(
        "| load | gateway | req/s | tok/s | tok/s ÷ {reference} (median, min–max of rounds) | TTFT p50 / p99 ms | \
         ITL p50 / p99 ms | gateway CPU ms/req | CPU ms/1k tok | peak RSS MiB | errors | mock outputs/s max |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for p in points {
        let r = &p.tokens_per_s_ratio_by_round;
        let ratio = match median(r) {
            Some(m) => {
                let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{m:.2} ({lo:.2}–{hi:.2})")
            }
            None => "–".into(),
        };
        let g = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied();
        s += &format!(
            "| {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} | {:.0} | {} | {} |\n",
            p.load.label(),
            p.gateway,
            f(p.requests_per_s_median, 1),
            f(p.tokens_per_s_median, 0),
            ratio,
            f(g(&p.ttft_ms, "p50"), 2),
            f(g(&p.ttft_ms, "p99"), 2),
            f(g(&p.itl_ms, "p50"), 3),
            f(g(&p.itl_ms, "p99"), 3),
            f(p.cpu_ms_per_request, 2),
            f(p.cpu_ms_per_1k_tokens, 1),
            p.peak_rss_mib,
            p.errors,
            f(p.mock_outputs_per_s_max, 0),
        );
    }
    s
}

/// The pids of `root` and every descendant alive now.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parent: Vec<(u32, u32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Some(ppid) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| stat_fields(&s).and_then(|f| f.get(1).and_then(|p| p.parse().ok())))
            {
                parent.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

/// The fields of a `/proc/<pid>/stat` line after the command (field 3 on).
pub fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// utime + stime of one `/proc/<pid>/stat` line, in clock ticks.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let f = stat_fields(stat)?;
    // Field 14 is index 11 after the command (fields 3.. start at 0).
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as f64
    } else {
        4096.0
    }
}

/// CPU seconds (per pid) and resident MiB of `root`'s tree now.
pub fn tree_sample(root: u32) -> (BTreeMap<u32, f64>, f64) {
    let (tck, page) = (clk_tck(), page_size());
    let mut cpu = BTreeMap::new();
    let mut rss = 0.0;
    for pid in process_tree(root) {
        if let Some(t) = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| cpu_ticks(&s)) {
            cpu.insert(pid, t as f64 / tck);
        }
        if let Some(pages) = std::fs::read_to_string(format!("/proc/{pid}/statm"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<f64>().ok()))
        {
            rss += pages * page / (1024.0 * 1024.0);
        }
    }
    (cpu, rss)
}

/// CPU used between two samples: per pid present in the later one, its
/// growth (a pid new since the first counts from zero).
pub fn cpu_between(before: &BTreeMap<u32, f64>, after: &BTreeMap<u32, f64>) -> f64 {
    after.iter().map(|(pid, a)| (a - before.get(pid).copied().unwrap_or(0.0)).max(0.0)).sum()
}

/// The machine: CPU model and logical cores (/proc/cpuinfo).
pub fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = info.lines().filter(|l| l.starts_with("processor")).count();
    format!("{model}, {cores} logical cores")
}

#[cfg(test)]
mod tests {
    use super::super::loadgen::{LoadRequestError, StreamTiming};
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn ratios_pair_rounds_and_skip_a_zero_reference() {
        assert_eq!(round_ratios(&[10.0, 20.0, 30.0], &[5.0, 0.0, 10.0]), vec![2.0, 3.0]);
    }

    #[test]
    fn percentiles_come_from_the_recorded_gaps_in_order() {
        let gaps = (1..=100).map(Duration::from_millis).collect();
        let o = Outcomes {
            ok: vec![StreamTiming {
                ttft: Some(Duration::from_millis(7)),
                gaps,
                chunks: 101,
                usage_tokens: None,
                total: Duration::ZERO,
            }],
            elapsed: Duration::from_secs(2),
            ..Default::default()
        };
        let (r, _) = RoundResult::new(0, &o, ProcUse::default(), Some(404));
        let p50 = r.itl_p50_ms.unwrap();
        let p99 = r.itl_p99_ms.unwrap();
        assert!((p50 - 50.0).abs() < 0.1, "{p50}");
        assert!((p99 - 99.0).abs() < 0.1, "{p99}");
        assert!((r.ttft_p50_ms.unwrap() - 7.0).abs() < 0.01);
        assert_eq!((r.tokens_per_s, r.requests_per_s, r.mock_outputs_per_s), (50.5, 0.5, Some(202.0)));
    }

    #[test]
    fn a_failed_request_counts_as_an_error_and_adds_no_latency() {
        let o = Outcomes {
            errors: vec![LoadRequestError::Status { addr: "a".into(), status: 500 }],
            elapsed: Duration::from_secs(1),
            ..Default::default()
        };
        let (r, lat) = RoundResult::new(0, &o, ProcUse::default(), None);
        assert_eq!((r.ok, r.errors, r.tokens), (0, 1, 0));
        assert_eq!(r.errors_by_kind.get("status"), Some(&1));
        assert!(lat.ttft.is_empty() && lat.itl.is_empty() && r.ttft_p50_ms.is_none());
    }

    #[test]
    fn stat_fields_are_counted_after_a_command_with_spaces_and_parens() {
        let line = "42 (vllm (api) x) S 7 42 42 0 -1 0 0 0 0 0 150 25 0 0 20 0 3 0 100 0 0";
        assert_eq!(cpu_ticks(line), Some(175));
        assert_eq!(stat_fields(line).unwrap()[1], "7");
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn cpu_between_counts_a_new_child_from_zero() {
        let a = BTreeMap::from([(1, 1.0), (2, 5.0)]);
        let b = BTreeMap::from([(1, 1.5), (3, 0.25)]);
        assert_eq!(cpu_between(&a, &b), 0.75);
    }

    #[test]
    fn this_process_tree_includes_itself_and_uses_cpu() {
        let me = std::process::id();
        assert!(process_tree(me).contains(&me));
        let (cpu, rss) = tree_sample(me);
        assert!(cpu.contains_key(&me) && rss > 0.0);
    }

    #[test]
    fn the_table_shows_the_ratio_median_and_range() {
        let mk = |tps: &[f64]| -> Vec<RoundResult> {
            tps.iter()
                .enumerate()
                .map(|(i, &t)| {
                    let o = Outcomes { elapsed: Duration::from_secs(1), ..Default::default() };
                    let (mut r, _) = RoundResult::new(i, &o, ProcUse::default(), None);
                    r.tokens_per_s = t;
                    r
                })
                .collect()
        };
        let load = LoadPoint::Closed { clients: 4 };
        let reference = PointSummary::new("ref", load, mk(&[100.0, 100.0, 100.0]), &Latencies::default());
        let mut other = PointSummary::new("gw", load, mk(&[50.0, 200.0, 80.0]), &Latencies::default());
        other.set_ratios(&reference);
        let t = markdown_table(&[reference, other], "ref");
        assert!(t.contains("| c=4 | gw | 0.0 | 80 | 0.80 (0.50–2.00) |"), "{t}");
    }
}

//! The plots: the gateway bench's throughput and latency
//! (`docs/img/gateway-bench.json`, docs/gateway-bench.md), the soak's
//! memory and descriptor curves (`docs/img/soak-1h.json`, docs/soak.md)
//! and the schema drift across vLLM releases ([`crate::drift`]).

use maud::{html, Markup, PreEscaped};
use serde_json::Value as Json;

use super::{page, SiteFile};
use crate::drift::drift;
use crate::load::Inputs;
use crate::svg::{bar_chart, line_chart, BarChart, LineChart, Series};

fn num(v: &Json, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for k in path {
        v = v.get(*k)?;
    }
    v.as_f64()
}

/// Closed-loop points of a bench report: `(gateway, clients, point)`.
fn closed(bench: &Json) -> Vec<(String, f64, &Json)> {
    let points = bench.get("points").and_then(Json::as_array).map(Vec::as_slice).unwrap_or(&[]);
    points
        .iter()
        .filter(|p| p.get("load").and_then(|l| l.get("kind")).and_then(Json::as_str) == Some("closed"))
        .filter_map(|p| {
            let g = p.get("gateway")?.as_str()?.to_string();
            Some((g, num(p, &["load", "clients"])?, p))
        })
        .collect()
}

fn bench_plots(bench: &Json) -> Markup {
    let pts = closed(bench);
    let mut gateways: Vec<&str> = Vec::new();
    let mut clients: Vec<f64> = Vec::new();
    for (g, c, _) in &pts {
        if !gateways.contains(&g.as_str()) {
            gateways.push(g);
        }
        if !clients.contains(c) {
            clients.push(*c);
        }
    }
    clients.sort_by(f64::total_cmp);
    // Concurrency on an even spacing (1, 4, 16, 64 are powers apart).
    let at = |c: f64| clients.iter().position(|x| *x == c).unwrap_or(0) as f64;
    let throughput = LineChart {
        title: "Gateway throughput, closed loop (median of rounds)".into(),
        x_label: "concurrent clients".into(),
        y_label: "tokens/s".into(),
        series: gateways
            .iter()
            .map(|g| Series {
                name: (*g).to_string(),
                points: pts
                    .iter()
                    .filter(|(x, _, _)| x == g)
                    .filter_map(|(_, c, p)| Some((at(*c), num(p, &["tokens_per_s_median"])?)))
                    .collect(),
            })
            .collect(),
        x_ticks: Some(clients.iter().map(|c| (at(*c), format!("{c}"))).collect()),
    };
    let latency_at = clients.iter().copied().find(|c| *c == 16.0).or_else(|| clients.last().copied()).unwrap_or(1.0);
    let latency = BarChart {
        title: format!("Time to first token at {latency_at} clients"),
        x_label: "gateway".into(),
        y_label: "ms".into(),
        categories: gateways.iter().map(|g| (*g).to_string()).collect(),
        groups: ["p50", "p90", "p99"]
            .iter()
            .map(|q| {
                let vals = gateways
                    .iter()
                    .map(|g| {
                        pts.iter()
                            .find(|(x, c, _)| x == g && *c == latency_at)
                            .and_then(|(_, _, p)| num(p, &["ttft_ms", q]))
                            .unwrap_or(0.0)
                    })
                    .collect();
                (format!("TTFT {q}"), vals)
            })
            .collect(),
    };
    html! {
        p { "From " code { "docs/img/gateway-bench.json" } " (" (bench.get("machine").and_then(Json::as_str).unwrap_or("?")) "; "
            (bench.get("settings").and_then(|s| s.get("engine")).and_then(Json::as_str).unwrap_or("")) "); docs/gateway-bench.md has the method." }
        (PreEscaped(line_chart(&throughput)))
        (PreEscaped(bar_chart(&latency)))
    }
}

fn soak_plots(soak: &Json) -> Markup {
    let samples = soak.get("samples").and_then(Json::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let curve = |who: &str, what: &str, scale: f64| Series {
        name: who.to_string(),
        points: samples
            .iter()
            .filter_map(|s| Some((num(s, &["at_s"])? / 60.0, num(s, &[who, what])? / scale)))
            .collect(),
    };
    let rss = LineChart {
        title: "Soak: resident memory".into(),
        x_label: "minutes".into(),
        y_label: "MiB".into(),
        series: vec![curve("runner", "rss_kib", 1024.0), curve("engine", "rss_kib", 1024.0)],
        x_ticks: None,
    };
    let fds = LineChart {
        title: "Soak: open descriptors".into(),
        x_label: "minutes".into(),
        y_label: "descriptors".into(),
        series: vec![curve("runner", "fds", 1.0), curve("engine", "fds", 1.0)],
        x_ticks: None,
    };
    html! {
        p { "From " code { "docs/img/soak-1h.json" } ": " (samples.len()) " samples, "
            (num(soak, &["requests_finished"]).map_or(0.0, |x| x) as u64) " requests at "
            (num(soak, &["concurrency"]).unwrap_or(0.0)) " concurrent; docs/soak.md has the method." }
        (PreEscaped(line_chart(&rss)))
        (PreEscaped(line_chart(&fds)))
    }
}

/// The drift per release as a table (the compatibility page shows it too).
pub(crate) fn drift_table() -> Markup {
    let d = drift(engine_protocol::schema::VLLM_TABLES);
    html! {
        table #drift {
            tr { th { "release" } th { "fields added" } th { "removed" } th { "retyped" } }
            @for r in &d {
                tr {
                    th { (r.version) }
                    td title=(r.added.join(", ")) { (r.added.len()) }
                    td title=(r.removed.join(", ")) { (r.removed.len()) }
                    td title=(r.retyped.join(", ")) { (r.retyped.len()) }
                }
            }
        }
    }
}

fn drift_plot() -> Markup {
    let d = drift(engine_protocol::schema::VLLM_TABLES);
    let chart = BarChart {
        title: "Wire fields changed per vLLM release (against the release before)".into(),
        x_label: "vLLM release".into(),
        y_label: "fields".into(),
        categories: d.iter().map(|r| r.version.to_string()).collect(),
        groups: vec![
            ("added".into(), d.iter().map(|r| r.added.len() as f64).collect()),
            ("removed".into(), d.iter().map(|r| r.removed.len() as f64).collect()),
            ("retyped".into(), d.iter().map(|r| r.retyped.len() as f64).collect()),
        ],
    };
    html! {
        p { "From engine-protocol's schema tables, one per release (" (d.len() + 1) " releases); every field of every struct reachable from the messages. "
            "The field names are on the " a href="compatibility.html" { "compatibility page" } "." }
        (PreEscaped(bar_chart(&chart)))
    }
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let body = html! {
        h2 { "Gateway overhead" }
        @match &inputs.bench { Some(b) => (bench_plots(b)), None => p { "No gateway bench report (docs/img/gateway-bench.json) in this checkout." } }
        h2 { "The soak" }
        @match &inputs.soak { Some(s) => (soak_plots(s)), None => p { "No soak report (docs/img/soak-1h.json) in this checkout." } }
        h2 { "Schema drift" }
        (drift_plot())
    };
    vec![page("plots.html", "Plots: gateway overhead, the soak, the schema drift", body)]
}

//! The index: the gateway by scenario matrix (the reference row first),
//! each cell a link to that gateway's page for that scenario, and a page
//! per scenario with every gateway's verdict on it.

use maud::{html, Markup};

use super::{page, SiteFile};
use crate::load::Inputs;
use crate::model::Outcome;

fn totals(outcomes: impl Iterator<Item = Outcome>) -> [usize; 5] {
    let mut t = [0; 5];
    for o in outcomes {
        t[match o {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::ExpectedFailure => 2,
            Outcome::Skip => 3,
            Outcome::Drift => 4,
        }] += 1;
    }
    t
}

/// The matrix, as the index shows it.
pub(crate) fn matrix(inputs: &Inputs) -> Markup {
    let scenarios = inputs.scenario_names();
    html! {
        table #gateway-matrix .matrix {
            thead {
                tr {
                    th { "gateway" }
                    @for s in &scenarios {
                        th .scenario data-scenario=(s) { a href=(format!("scenarios/{s}.html")) { (s) } }
                    }
                    th { "pass" } th { "fail" } th { "expected failure" } th { "skip" } th { "drift" }
                }
            }
            tbody {
                @for (i, g) in inputs.gateways.iter().enumerate() {
                    @let name = &g.report.gateway;
                    tr .gateway .reference[i == 0] data-gateway=(name) {
                        th { a href=(format!("gateways/{name}/index.html")) { (name) } }
                        @for s in &scenarios {
                            @match g.report.row(s) {
                                Some(r) => td class=(format!("cell {}", r.outcome.class())) data-scenario=(s)
                                    title=(format!("{name} · {s}: {}", r.outcome.label())) {
                                    a href=(format!("gateways/{name}/{s}.html")) { (symbol(r.outcome)) }
                                },
                                None => td .cell .none data-scenario=(s) title=(format!("{name} · {s}: not run")) {
                                    a href=(format!("scenarios/{s}.html")) { "·" }
                                },
                            }
                        }
                        @let t = totals(g.report.results.iter().map(|r| r.outcome));
                        @for n in t { td { (n) } }
                    }
                }
            }
        }
    }
}

fn symbol(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "✓",
        Outcome::Fail => "✗",
        Outcome::ExpectedFailure => "!",
        Outcome::Skip => "–",
        Outcome::Drift => "~",
    }
}

fn legend() -> Markup {
    html! {
        p .legend {
            span .pass { "✓ pass" } span .fail { "✗ fail" }
            span .xfail { "! expected failure (a known finding, with its reason)" } span .skip { "– skip" } span .drift { "~ drift (unknown fields read)" }
            span .none { "· not run" }
        }
    }
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut out = Vec::new();
    let findings: usize =
        inputs.gateways.iter().map(|g| g.report.results.iter().filter(|r| r.outcome.is_finding()).count()).sum();
    let reference = inputs.gateways.first().map(|g| g.report.gateway.as_str()).unwrap_or("");
    let body = html! {
        p {
            "The engine-conformance suite plays a vLLM EngineCore for each gateway below and drives the gateway through its OpenAI API; "
            "what the gateway sends the engine and answers its client is checked against vLLM's own frontend ("
            strong { (reference) } ", the first row) and the goldens vLLM's own code wrote. "
            "A red or orange cell is a finding: its page is a bug report with the request, the engine script, the decoded engine messages "
            "against vLLM's, and the one command that reproduces it."
        }
        p { (inputs.gateways.len()) " gateways, " (inputs.scenario_names().len()) " scenarios, " (findings) " findings; reports from "
            code { (inputs.reports_dir) } "." }
        (legend())
        (matrix(inputs))
        h2 { "More matrices" }
        ul {
            li { a href="differential.html" { "The differential" } ": every field of vLLM's request models set alone, each gateway against its reference frontend ("
                (inputs.differentials.len()) " reports)." }
            li { a href="releases.html" { "Engine releases" } ": which vLLM releases each gateway can talk to (" (inputs.sweeps.len()) " sweeps)." }
            li { a href="faults.html" { "Wire faults" } ": each gateway under a fault-injecting wire (" (inputs.faults.len()) " reports)." }
            li { a href="codecs.html" { "Codec testees" } ": implementations of the wire codec on the committed corpus (" (inputs.codecs.len()) ")." }
            li { a href="compatibility.html" { "Cross-release compatibility" } " of the wire messages, and the schema drift per release." }
            li { a href="plots.html" { "Plots" } ": gateway overhead, the soak's memory and descriptors, the schema drift." }
        }
        h2 { "How much the suite catches" }
        ul {
            @if inputs.documents.iter().any(|d| d.page == "equivalences.html") {
                li { a href="equivalences.html" { "The equivalences the checks allow" } ": each proven on a live engine, alone and with every sampling parameter that can change it." }
            }
            @if inputs.documents.iter().any(|d| d.page == "mutation.html") {
                li { a href="mutation.html" { "Mutation testing" } ": the share of engine-protocol's mutants its tests kill, per module." }
            }
            @if inputs.documents.iter().any(|d| d.page == "planted-bugs.html") {
                li { a href="planted-bugs.html" { "Planted gateway bugs" } ": every field of the wire's messages planted wrong, one at a time, and the share the differential finds." }
            }
        }
    };
    out.push(page("index.html", "Gateways against vLLM's EngineCore protocol", body));
    for s in inputs.scenario_names() {
        let file = inputs.scenarios.get(s);
        let doc = file
            .map(|f| f.doc.as_str())
            .or_else(|| inputs.gateways.iter().find_map(|g| g.report.row(s).map(|r| r.doc.as_str())));
        let body = html! {
            p { (doc.unwrap_or("")) }
            @if let Some(f) = file { @if !f.reference.is_empty() { p { "Reference: " (f.reference) } } }
            table {
                tr { th { "gateway" } th { "verdict" } th { "detail" } }
                @for g in &inputs.gateways {
                    @let name = &g.report.gateway;
                    tr {
                        th { (name) }
                        @match g.report.row(s) {
                            Some(r) => {
                                td class=(r.outcome.class()) { a href=(format!("../gateways/{name}/{s}.html")) { (r.outcome.label()) } }
                                td { (crate::markdown::shorten(r.detail.as_deref().unwrap_or(""), 300)) }
                            },
                            None => { td .none { "not run" } td {} },
                        }
                    }
                }
            }
        };
        out.push(page(&format!("scenarios/{s}.html"), &format!("Scenario {s}"), body));
    }
    out
}

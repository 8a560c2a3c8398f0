//! The wire-fault matrix (docs/runner/fault-wire.md): per fault case and
//! gateway, what the request the fault hit got and what the next request
//! got, each cell linked to the case's page (the schedule, what was
//! applied, both answers, the command that reruns just that case).

use maud::html;
use serde_json::Value as Json;

use super::{page, SiteFile};
use crate::load::Inputs;
use crate::model::FaultCase;
use crate::repro;

/// How a case went, as a cell's class: `served` (both requests got their
/// 4 tokens), `error` (the fault surfaced as an error answer), `silent`
/// (a success with tokens missing or extra), `hung`, `died` (the gateway
/// was gone after the case), `not-run`.
pub(crate) fn class(c: &FaultCase) -> &'static str {
    if c.error.is_some() {
        return "not-run";
    }
    if c.gateway_alive == Some(false) {
        return "died";
    }
    let answers = [&c.affected, &c.next];
    if answers.iter().any(|a| a.get("hung") == Some(&Json::Bool(true))) {
        return "hung";
    }
    let tokens = |a: &Json| a.get("completion_tokens").and_then(Json::as_u64);
    let status = |a: &Json| a.get("status").and_then(Json::as_u64);
    if answers.iter().any(|a| status(a) == Some(200) && tokens(a).is_some_and(|t| t != 4)) {
        return "silent";
    }
    if answers.iter().all(|a| status(a) == Some(200)) {
        "served"
    } else {
        "error"
    }
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut cases: Vec<&str> = Vec::new();
    for f in &inputs.faults {
        for c in &f.report.cases {
            if !cases.contains(&c.case.as_str()) {
                cases.push(&c.case);
            }
        }
    }
    let mut out = Vec::new();
    let body = html! {
        p { "The suite's mock engine talks to the gateway through the fault-injecting wire; per case a fresh gateway starts, the fault is armed once "
            "it is ready, and two non-streamed completions of 4 tokens follow: the one the fault hits, then the next. Each cell: what the first got → what the next got." }
        p .legend { span .served { "served" } span .error { "error answer" } span .silent { "success with tokens missing or extra" }
            span .hung { "hung" } span .died { "gateway died" } span .not-run { "not run" } }
        table #fault-matrix .matrix {
            thead { tr { th { "fault case" } @for f in &inputs.faults { th { (f.report.gateway) } } } }
            tbody {
                @for case in &cases {
                    tr {
                        th { (case) }
                        @for f in &inputs.faults {
                            @match f.report.cases.iter().find(|c| c.case == *case) {
                                Some(c) => td class=(format!("cell {}", class(c))) {
                                    a href=(format!("faults/{}/{case}.html", f.report.gateway)) {
                                        (gateway_scoring::scoreboard::fault_answer(&c.affected)) " → " (gateway_scoring::scoreboard::fault_answer(&c.next))
                                    }
                                },
                                None => td .cell .none { "not run" },
                            }
                        }
                    }
                }
            }
        }
    };
    out.push(page("faults.html", "Wire faults: each gateway under a fault-injecting wire", body));
    for f in &inputs.faults {
        for c in &f.report.cases {
            let repro = repro::fault(&inputs.named, &f.report.gateway, &c.case);
            let pretty = |v: &Json| serde_json::to_string_pretty(v).unwrap_or_default();
            let body = html! {
                p class=(class(c)) { strong { (class(c)) } }
                @if let Some(e) = &c.error { p { "Not run: " (e) } }
                h2 { "The fault" } pre { code { (pretty(&c.schedule)) } }
                h2 { "Applied" } pre { code { (pretty(&c.applied)) } }
                h2 { "The request the fault hit" } pre { code { (pretty(&c.affected)) } }
                h2 { "The next request" } pre { code { (pretty(&c.next)) } }
                h2 { "Reproduce" } pre { code { (repro.script()) } }
                p { "Deadline " (f.report.deadline_s) " s per request; report " code { (inputs.reports_dir) "/" (f.file) } "." }
            };
            out.push(page(
                &format!("faults/{}/{}.html", f.report.gateway, c.case),
                &format!("{} under {}", f.report.gateway, c.case),
                body,
            ));
        }
    }
    out
}

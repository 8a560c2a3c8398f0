//! Every golden case under `golden/` as its own named test
//! (`vllm/0.33.0/request/add_default`), plus corpus-level checks: the corpus
//! loads without a malformed file and is not empty. Skips are denied
//! unless `golden/expected-skips.txt` lists them.

use conformance::check::{check, Verdict};
use conformance::corpus;
use conformance::skips::ExpectedSkips;
use libtest_mimic::{Arguments, Failed, Trial};

/// The committed corpus must hold at least this many message cases (issue
/// #2: at least 150 per version, two versions).
const MIN_MESSAGE_CASES: usize = 300;

fn main() {
    let args = Arguments::from_args();
    let root = engine_testkit::corpus::golden_dir();
    let (cases, errors) = corpus::load(&root).expect("golden/ is readable");
    let mut trials = Vec::new();
    let n_messages = cases.iter().filter(|c| c.kind == "message").count();
    let load_errors: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.file.display(), e.error)).collect();
    trials.push(Trial::test("corpus_has_no_malformed_case_files", move || {
        if load_errors.is_empty() {
            Ok(())
        } else {
            Err(Failed::from(load_errors.join("\n")))
        }
    }));
    trials.push(Trial::test("corpus_holds_at_least_300_message_cases", move || {
        if n_messages >= MIN_MESSAGE_CASES {
            Ok(())
        } else {
            Err(Failed::from(format!("{n_messages} message cases, expected at least {MIN_MESSAGE_CASES}")))
        }
    }));
    // Skips are denied: a case the build cannot check fails, unless
    // golden/expected-skips.txt names it with a reason; a listed case that
    // is checked (or gone) fails as a stale entry.
    let list = ExpectedSkips::load(&root.join("expected-skips.txt")).expect("golden/expected-skips.txt");
    for entry in list.entries.clone() {
        let listed = cases.iter().find(|c| c.report_id() == entry.case).cloned();
        trials.push(Trial::test(format!("expected_skip_is_not_stale/{}", entry.case), move || match listed {
            None => Err(Failed::from(format!("stale expected skip: no case {}", entry.case))),
            Some(case) => match check(&case) {
                Verdict::Skip(_) => Ok(()),
                other => Err(Failed::from(format!("stale expected skip ({}): now {other:?}", entry.reason))),
            },
        }));
    }
    trials.push(Trial::test("vllm_parity_names_each_child_as_vllms_parent_request_names_it", {
        let cases = cases.clone();
        move || children_named_as_vllm_names_them(&cases)
    }));
    for case in cases {
        let name = case.report_id();
        let allowed = list.entries.iter().find(|e| e.case == name).map(|e| e.reason.clone());
        trials.push(Trial::test(name, move || match check(&case) {
            Verdict::Pass => Ok(()),
            Verdict::Skip(_) if allowed.is_some() => Ok(()),
            Verdict::Skip(why) => Err(Failed::from(format!("skipped ({why}), and skips are denied"))),
            other => Err(Failed::from(other.to_string())),
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// A translation case's `engine_request.request_id` is volatile (a server
/// appends random characters to it), but the generator records it with
/// that randomisation off: the id vLLM's `ParentRequest` gives child `i`
/// of the case's request id, which `TranslateOptions::vllm_parity` must
/// give too. Every case of more than one child is compared.
fn children_named_as_vllm_names_them(cases: &[engine_testkit::corpus::Case]) -> Result<(), Failed> {
    use conformance::kinds::translation::{options_for, run};
    use engine_testkit::corpus::Body;
    let mut compared = 0;
    for case in cases.iter().filter(|c| c.kind == "translation") {
        let Body::Other { input, expected } = &case.body else { continue };
        let Some(want) = expected.get("requests").and_then(|r| r.as_array()).filter(|r| r.len() > 1) else {
            continue;
        };
        // Older corpora record the sampling parameters only.
        let Some(want) = want.iter().map(|r| r["engine_request"]["request_id"].as_str()).collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let t = match run(case, input, &options_for(input)) {
            Ok(Ok(t)) => t,
            other => return Err(Failed::from(format!("{}: not translated: {other:?}", case.report_id()))),
        };
        // The id the gateway tracks, the typed request's and the one on the wire.
        for ours in [
            t.requests.iter().map(|r| Some(r.request_id.as_str())).collect::<Vec<_>>(),
            t.requests.iter().map(|r| Some(r.typed.request_id.as_str())).collect(),
            t.requests
                .iter()
                .map(|r| match &r.request {
                    engine_protocol::Value::Struct(s) => s.str_field("request_id"),
                    _ => None,
                })
                .collect(),
        ] {
            if ours != want.iter().copied().map(Some).collect::<Vec<_>>() {
                return Err(Failed::from(format!("{}: children {ours:?}, vLLM's {want:?}", case.report_id())));
            }
        }
        compared += 1;
    }
    if compared == 0 {
        return Err(Failed::from("no translation case of several children records its engine requests"));
    }
    Ok(())
}

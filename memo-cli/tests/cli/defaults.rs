//! memoctl's default prefixes are the ones the README's worker set-up uses,
//! so an operator who follows both sweeps the runs the workers wrote
//! (issue 20, case 11).

use std::process::Command;

/// The string literal passed to `call` in the README's Rust code.
fn readme_prefix(readme: &str, call: &str) -> String {
    let start = readme
        .find(call)
        .unwrap_or_else(|| panic!("the README calls {call}"));
    let rest = &readme[start + call.len()..];
    let open = rest.find('"').expect("a string literal") + 1;
    let close = open + rest[open..].find('"').expect("its end");
    rest[open..close].to_string()
}

/// The `[default: ...]` that `memoctl --help` shows for `flag`.
fn memoctl_default(help: &str, flag: &str) -> String {
    let start = help
        .find(flag)
        .unwrap_or_else(|| panic!("memoctl has {flag}"));
    let rest = &help[start..];
    let open = rest.find("[default: ").expect("a default") + "[default: ".len();
    let close = open + rest[open..].find(']').expect("its end");
    rest[open..close].to_string()
}

#[test]
fn memoctl_defaults_to_the_prefixes_the_readme_workers_use() {
    let readme = include_str!("../../../README.md");
    let help = Command::new(env!("CARGO_BIN_EXE_memoctl"))
        .arg("--help")
        .output()
        .expect("memoctl runs");
    let help = String::from_utf8(help.stdout).unwrap();
    assert_eq!(
        readme_prefix(readme, "ObjectStoreRuntimeStore::new(objects, "),
        memoctl_default(&help, "--runs-prefix"),
    );
    assert_eq!(
        readme_prefix(readme, ".memo_store(MemoStore::new(objects.clone(), "),
        memoctl_default(&help, "--memo-prefix"),
    );
}

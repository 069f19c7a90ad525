//! The layers of `src/` import downward only (the architecture in `lib.rs`):
//! a module may use `crate::X` only for an `X` of a lower layer. Comments and
//! `#[cfg(test)]` code are not imports.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom first. Modules of one layer do not import each other either.
const LAYERS: &[&[&str]] = &[
    &["jsonrpc", "sse", "signal", "event_loops", "hex_text"],
    &["protocol"],
    &["telemetry"],
    &["config"],
    &["upstream", "policy", "limits"],
    &["route"],
    &["mrtr"],
    &["front"],
    &["app"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `crate::X` names used by the non-test code of one file.
fn imports(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

#[test]
fn layers_import_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // The binary's own modules (`mod cli;` in main.rs) sit above the library.
    let main_rs = std::fs::read_to_string(src.join("main.rs")).expect("read main.rs");
    let binary: BTreeSet<String> = main_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        if module == "main"
            || module == "lib"
            || binary.contains(&module)
            || name.ends_with("tests.rs")
        {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is in no layer",
                rel.display()
            ));
            continue;
        };
        seen.insert(module.clone());
        for used in imports(&std::fs::read_to_string(file).expect("read file")) {
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(l) if l < own => {}
                _ => wrong.push(format!(
                    "{}: `{module}` imports `crate::{used}`",
                    rel.display()
                )),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
    // The table names every module, and every module exists.
    let all: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter().map(std::string::ToString::to_string))
        .collect();
    assert_eq!(seen, all, "LAYERS and src/ disagree");
}

#[test]
fn the_checker_sees_imports_and_skips_comments_and_tests() {
    let text = "use crate::front::Gateway;\n// crate::app in a comment\nfn f() { crate::mrtr::x(); }\n#[cfg(test)]\nuse crate::config;\n";
    let found: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(found, ["front", "mrtr"]);
}

//! Renamed and moved keys keep working for at least one release: before a
//! file is deserialized, each key written under an old name or in an old
//! table is moved to where it lives now, and a deprecation warning naming
//! both (with the old key's line) is kept for `redmark check` and the log.
//! Setting both the old and the new key is an error: which one was meant
//! cannot be guessed. The rule and how to retire an entry are in
//! docs/src/reference/compatibility.md.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

/// One key that moved: `old` and `new` are dotted paths from the top of the
/// file, where `*` stands for every element of an array of tables (every
/// `[[route]]`). Both paths have the same prefix up to their last `*`, so a
/// key moves within its own `[[route]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    pub old: &'static str,
    pub new: &'static str,
    /// The release that made the change; the old name is accepted until at
    /// least the next one.
    pub since: &'static str,
}

/// The keys of `redmark.toml` that moved, oldest first. Empty: no key has
/// been renamed or moved since the format was first released.
pub const CONFIG_RENAMES: &[Renamed] = &[];

/// Logs each deprecated key once, as the file is loaded (at start and at
/// each reload): WARN, target `redmark::config`.
pub fn log(deprecations: &[super::ConfigError]) {
    for d in deprecations {
        tracing::warn!(target: "redmark::config", "{d}");
    }
}

/// A problem with a moved key, located by the byte span of the key as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub span: Range<usize>,
    pub message: String,
}

/// Moves every renamed key of `doc` to its new place. Returns the warnings
/// (one per old key found) and the errors (old and new both set, or the new
/// place taken by something that is not a table).
pub fn apply(doc: &mut DeTable<'_>, renames: &[Renamed]) -> (Vec<Moved>, Vec<Moved>) {
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for rename in renames {
        let old: Vec<&str> = rename.old.split('.').collect();
        let new: Vec<&str> = rename.new.split('.').collect();
        let shared = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let (old_rest, new_rest) = (&old[shared..], &new[shared..]);
        let mut tables = Vec::new();
        collect_tables(doc, &old[..shared], &mut tables);
        for table in tables {
            let Some((span, value)) = take(table, old_rest) else {
                continue;
            };
            match put(table, new_rest, value) {
                Ok(()) => warnings.push(Moved {
                    span,
                    message: format!(
                        "`{}` is deprecated since {}: write `{}` instead (the old name will be removed in a later release)",
                        rename.old, rename.since, rename.new
                    ),
                }),
                Err(why) => errors.push(Moved {
                    span,
                    message: format!("`{}` (deprecated): {why}", rename.old),
                }),
            }
        }
    }
    (warnings, errors)
}

/// Every table at `path` (descending into each element of a `*` array).
fn collect_tables<'d, 'i>(
    table: &'d mut DeTable<'i>,
    path: &[&str],
    out: &mut Vec<&'d mut DeTable<'i>>,
) {
    let Some((first, rest)) = path.split_first() else {
        out.push(table);
        return;
    };
    if *first == "*" {
        // `*` only follows an array's own key: handled below.
        return;
    }
    let Some(value) = table.get_mut(*first) else {
        return;
    };
    match (value.get_mut(), rest.first()) {
        (DeValue::Array(items), Some(&"*")) => {
            for item in items.iter_mut() {
                if let DeValue::Table(t) = item.get_mut() {
                    collect_tables(t, &rest[1..], out);
                }
            }
        }
        (DeValue::Table(t), _) => collect_tables(t, rest, out),
        _ => {}
    }
}

/// Removes the key at `path` below `table`, with the span of its value.
fn take<'i>(
    table: &mut DeTable<'i>,
    path: &[&str],
) -> Option<(Range<usize>, Spanned<DeValue<'i>>)> {
    let (last, parents) = path.split_last()?;
    let mut here = table;
    for key in parents {
        match here.get_mut(*key)?.get_mut() {
            DeValue::Table(t) => here = t,
            _ => return None,
        }
    }
    let (key, value) = here.remove_entry(*last)?;
    Some((key.span(), value))
}

/// Puts `value` at `path` below `table`, making the tables on the way.
fn put<'i>(
    table: &mut DeTable<'i>,
    path: &[&str],
    value: Spanned<DeValue<'i>>,
) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("has no new place".into());
    };
    let mut here = table;
    for key in parents {
        let span = value.span();
        let entry = here
            .entry(Spanned::new(
                span.clone(),
                DeString::from((*key).to_owned()),
            ))
            .or_insert_with(|| Spanned::new(span, DeValue::Table(DeTable::new())));
        match entry.get_mut() {
            DeValue::Table(t) => here = t,
            _ => {
                return Err(format!(
                    "`{key}` on the way to its new place is not a table"
                ));
            }
        }
    }
    if here.contains_key(*last) {
        return Err(format!(
            "both it and its new name `{}` are set; keep only the new one",
            path.join(".")
        ));
    }
    here.insert(
        Spanned::new(value.span(), DeString::from((*last).to_owned())),
        value,
    );
    Ok(())
}

/// Renames no release made, for the tests of the mechanism (here and in the
/// schema): a key moved within its table and one moved into a sub-table.
#[cfg(test)]
pub(super) const TEST_RENAMES: &[Renamed] = &[
    Renamed {
        old: "server.grace",
        new: "server.shutdown_grace",
        since: "0.2.0",
    },
    Renamed {
        old: "route.*.timeout",
        new: "route.*.upstream.call_timeout",
        since: "0.2.0",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(text: &str, renames: &[Renamed]) -> (toml::Value, Vec<Moved>, Vec<Moved>) {
        let mut doc = DeTable::parse(text).unwrap();
        let (warnings, errors) = apply(doc.get_mut(), renames);
        let value: toml::Value =
            serde::Deserialize::deserialize(toml::de::Deserializer::from(doc)).unwrap();
        (value, warnings, errors)
    }

    #[test]
    fn an_old_name_is_moved_and_warned_about_with_its_place() {
        let text = "[server]\nlisten = \"x\"\ngrace = \"5s\"\n";
        let (value, warnings, errors) = moved(text, TEST_RENAMES);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(value["server"]["shutdown_grace"].as_str(), Some("5s"));
        assert!(value["server"].get("grace").is_none());
        assert_eq!(warnings.len(), 1);
        assert_eq!(&text[warnings[0].span.clone()], "grace");
        assert!(
            warnings[0].message.contains(
                "`server.grace` is deprecated since 0.2.0: write `server.shutdown_grace`"
            ),
            "{}",
            warnings[0].message
        );
    }

    #[test]
    fn a_key_moves_into_a_table_of_each_route_of_its_own() {
        let text = "[[route]]\nname = \"a\"\ntimeout = \"1m\"\n[route.upstream]\nurl = \"u\"\n\n[[route]]\nname = \"b\"\n\n[[route]]\nname = \"c\"\ntimeout = \"2m\"\n";
        let (value, warnings, errors) = moved(text, TEST_RENAMES);
        assert!(errors.is_empty(), "{errors:?}");
        let routes = value["route"].as_array().unwrap();
        assert_eq!(routes[0]["upstream"]["call_timeout"].as_str(), Some("1m"));
        assert_eq!(routes[0]["upstream"]["url"].as_str(), Some("u"));
        assert!(routes[1].get("upstream").is_none());
        // A table that did not exist is made.
        assert_eq!(routes[2]["upstream"]["call_timeout"].as_str(), Some("2m"));
        assert_eq!(warnings.len(), 2);
    }

    #[test]
    fn old_and_new_both_set_is_an_error_naming_both() {
        let text = "[server]\ngrace = \"5s\"\nshutdown_grace = \"9s\"\n";
        let (_, warnings, errors) = moved(text, TEST_RENAMES);
        assert!(warnings.is_empty());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].message.contains("`server.grace`")
                && errors[0].message.contains("`shutdown_grace`"),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn nothing_moves_when_nothing_old_is_written() {
        let text = "[server]\nshutdown_grace = \"9s\"\n";
        let (value, warnings, errors) = moved(text, TEST_RENAMES);
        assert!(warnings.is_empty() && errors.is_empty());
        assert_eq!(value["server"]["shutdown_grace"].as_str(), Some("9s"));
    }

    #[test]
    fn the_loader_reads_an_old_name_and_check_reports_it_as_a_warning() {
        let text = "[server]\nlisten = \"127.0.0.1:8080\"\ngrace = \"5s\"\n\n[[route]]\nname = \"r\"\npath = \"/mcp\"\ntimeout = \"2m\"\n[route.upstream]\nurl = \"http://127.0.0.1:9000/mcp\"\n";
        let config = crate::config::Config::parse_with(
            text,
            "redmark.toml",
            std::path::PathBuf::from("/etc/redmark"),
            TEST_RENAMES,
        )
        .unwrap();
        assert_eq!(
            config.server.shutdown_grace,
            std::time::Duration::from_secs(5)
        );
        let upstream = config.routes[0].get_ref().upstream.get_ref();
        assert_eq!(upstream.call_timeout, std::time::Duration::from_secs(120));
        let at: Vec<(usize, usize)> = config
            .deprecations
            .iter()
            .map(|d| (d.line, d.column))
            .collect();
        assert_eq!(at, [(3, 1), (8, 1)]);
        let (findings, _) = crate::app::checks::offline(&config, text, "redmark.toml");
        assert!(findings.errors.is_empty(), "{:?}", findings.errors);
        assert_eq!(findings.warnings, config.deprecations);
        assert_eq!(findings.exit_code(), 2, "warnings only");
        // Without the rename, the old name is an unknown key, as before.
        let err =
            crate::config::Config::parse(text, "redmark.toml", "/etc/redmark".into()).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        // Both names set: an error at the old key, nothing loaded.
        let both = text.replace("grace = \"5s\"", "grace = \"5s\"\nshutdown_grace = \"1s\"");
        let err = crate::config::Config::parse_with(
            &both,
            "redmark.toml",
            "/etc/redmark".into(),
            TEST_RENAMES,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("redmark.toml:3:1: `server.grace` (deprecated): both"),
            "{err}"
        );
    }

    #[test]
    fn every_shipped_rename_is_well_formed() {
        for r in CONFIG_RENAMES {
            let old: Vec<&str> = r.old.split('.').collect();
            let new: Vec<&str> = r.new.split('.').collect();
            let last_star = |p: &[&str]| p.iter().rposition(|k| *k == "*");
            assert_eq!(last_star(&old), last_star(&new), "{r:?}");
            if let Some(i) = last_star(&old) {
                assert_eq!(old[..=i], new[..=i], "{r:?}");
            }
            assert!(!r.since.is_empty() && r.old != r.new, "{r:?}");
        }
    }
}

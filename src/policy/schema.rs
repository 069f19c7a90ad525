//! The JSON Schema of a policy file, made from the policy file's own types
//! with the generator `redmark.toml`'s schema uses, so editors check both
//! files the same way (`redmark config-schema --policy`).

use schemars::Schema;

/// The JSON Schema of a policy file (`[route] policy`).
pub fn policy_schema() -> Schema {
    crate::config::schema::generator().into_root_schema_for::<super::PolicyFile>()
}

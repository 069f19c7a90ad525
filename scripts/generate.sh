#!/usr/bin/env bash
# Writes the files generated from the code, which tests/generated.rs checks
# are up to date: the JSON Schemas of redmark.toml and policy files
# (schemas/), the configuration reference pages made from them
# (docs/src/reference/config.md, policy.md), and the man page
# (docs/man/redmark.1). Run it after changing a config type, a doc comment
# on one, or the command line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --quiet --bin redmark
redmark="${CARGO_TARGET_DIR:-target}/debug/redmark"
"$redmark" config-schema > schemas/redmark.schema.json
"$redmark" config-schema --policy > schemas/policy.schema.json
"$redmark" config-schema --markdown > docs/src/reference/config.md
"$redmark" config-schema --policy --markdown > docs/src/reference/policy.md
"$redmark" man > docs/man/redmark.1
echo "generated: schemas/*.schema.json docs/src/reference/{config,policy}.md docs/man/redmark.1"

#!/usr/bin/env bash
# Builds the user's manual (docs/, an mdBook) into target/book/ and checks
# every link in it: each relative link must name a page of the book and each
# #anchor an id in that page (scripts/check-book-links.py); a broken one fails.
# mdBook is installed once, pinned, under .cache/tools (scripts/install-tools.sh).
#
#   scripts/docs.sh            build and check (scripts/test.sh runs this)
#   scripts/docs.sh --open     the same, then print the path of the book's index
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mdbook="$(bash scripts/install-tools.sh mdbook)"
rm -rf target/book
"$mdbook" build docs
python3 scripts/check-book-links.py target/book docs/src
if [[ "${1:-}" == "--open" ]]; then
    echo "$(pwd)/target/book/index.html"
fi

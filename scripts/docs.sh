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

# The shipped alert rules: valid, their unit tests pass, and each alert has
# its runbook in the book under its own name.
promtool=.cache/prometheus/usr/bin/promtool
[[ -x "$promtool" ]] || bash scripts/setup-test-deps.sh
"$promtool" check rules examples/prometheus/alerts.yml
(cd examples/prometheus && "../../$promtool" test rules alerts_test.yml)
python3 - <<'PY'
import re, sys
rules = open("examples/prometheus/alerts.yml", encoding="utf-8").read()
book = open("docs/src/operations/runbooks.md", encoding="utf-8").read()
alerts = re.findall(r"^\s*- alert: (\S+)", rules, re.M)
runbooks = set(re.findall(r"^## (\S+)$", book, re.M))
problems = [f"{a}: no '## {a}' in docs/src/operations/runbooks.md" for a in alerts if a not in runbooks]
problems += [f"{r}: a runbook for no alert" for r in runbooks - set(alerts)]
for a in alerts:
    if f'runbook: "operations/runbooks.md#{a.lower()}"' not in rules:
        problems.append(f"{a}: its runbook annotation is not operations/runbooks.md#{a.lower()}")
print("\n".join(problems) or f"{len(alerts)} alerts, each with its runbook")
sys.exit(1 if problems or not alerts else 0)
PY
if [[ "${1:-}" == "--open" ]]; then
    echo "$(pwd)/target/book/index.html"
fi

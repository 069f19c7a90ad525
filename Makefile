# Each target runs the same command CI runs (.ci/run -> scripts/test.sh, then
# scripts/conformance.sh, then scripts/fuzz.sh); the scripts hold the commands,
# this file only names them. `make` alone lists the targets.

.DEFAULT_GOAL := help
.PHONY: help fmt lint docs test conformance fuzz bench ci

help: ## list the targets
	@echo "make targets (each the command CI runs, or part of it):"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

fmt: ## cargo fmt --check (the first step of lint; `cargo fmt` rewrites)
	cargo fmt --check

lint: ## scripts/lint.sh: fmt --check, clippy -D warnings, cargo deny (licenses, bans, sources)
	bash scripts/lint.sh

docs: ## scripts/docs.sh: build the book (docs/, mdBook) into target/book and check every link and anchor
	bash scripts/docs.sh

test: ## scripts/test.sh: lint, the book, then unit + integration tests (`scripts/test.sh --quick`: tests only)
	bash scripts/test.sh

conformance: ## scripts/conformance.sh: the official MCP conformance suite, native server alone and through redmark
	bash scripts/conformance.sh

fuzz: ## scripts/fuzz.sh: every fuzz target for FUZZ_SECONDS (30) each; cargo-fuzz on nightly, else stable
	bash scripts/fuzz.sh

bench: ## scripts/bench.sh: relay benchmark, direct vs nginx vs redmark (not part of CI)
	bash scripts/bench.sh

ci: ## .ci/run: everything CI runs (test, then conformance, then fuzz)
	bash .ci/run

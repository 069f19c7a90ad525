// Summarises one run of the MCP conformance suite (scripts/conformance.sh):
// a table of checks per scenario, printed and written as Markdown, and an
// exit code that is non-zero when a required scenario failed unexpectedly.
//
//   node report.mjs RESULTS_DIR REQUIRED_LIST EXPECTED_FAILURES OUT_MD [SECONDS]
//
// RESULTS_DIR        the suite's `-o` directory (server-<scenario>-<time>/checks.json)
// REQUIRED_LIST      file with the required server scenarios, one per line
// EXPECTED_FAILURES  the suite's baseline file (`server:` list of `scenario` or
//                    `scenario:check-id`); a failure listed there is expected
// OUT_MD             where the Markdown table goes
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [resultsDir, requiredFile, baselineFile, outMd, seconds] = process.argv.slice(2);
const required = readFileSync(requiredFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);

// The baseline is the suite's own YAML; its `server:` list is all we read.
const baseline = new Set();
let inServer = false;
for (const line of readFileSync(baselineFile, 'utf8').split('\n')) {
  const text = line.replace(/#.*/, '').trimEnd();
  if (/^\S/.test(text)) inServer = /^server:/.test(text);
  const item = text.match(/^\s+-\s+(\S+)/);
  if (inServer && item) baseline.add(item[1]);
}

// The newest result directory of each scenario.
const runs = new Map();
for (const dir of readdirSync(resultsDir).sort()) {
  const m = dir.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
  if (m) runs.set(m[1], join(resultsDir, dir, 'checks.json'));
}

function tally(scenario) {
  const file = runs.get(scenario);
  if (!file) return null;
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  const count = (status) => checks.filter((c) => c.status === status).length;
  const failed = checks.filter((c) => c.status === 'FAILURE');
  const unexpected = baseline.has(scenario)
    ? []
    : failed.filter((c) => !baseline.has(`${scenario}:${c.id}`)).map((c) => c.id);
  return {
    passed: count('SUCCESS'),
    failed: failed.length,
    warnings: count('WARNING'),
    other: checks.length - count('SUCCESS') - failed.length - count('WARNING'),
    unexpected,
  };
}

const rows = [];
const problems = [];
for (const scenario of required) {
  const t = tally(scenario);
  if (!t) {
    problems.push(`${scenario}: no results (the scenario did not run)`);
    rows.push([scenario, '-', '-', '-', '-', 'NO RESULT']);
    continue;
  }
  let verdict = 'pass';
  if (t.unexpected.length > 0) {
    verdict = 'FAIL';
    problems.push(`${scenario}: unexpected failures: ${t.unexpected.join(', ')}`);
  } else if (t.failed > 0) {
    verdict = 'expected failure';
  } else if (t.warnings > 0) {
    verdict = 'pass (warnings)';
  }
  rows.push([scenario, t.passed, t.failed, t.warnings, t.other, verdict]);
}
// Scenarios the requirement set runs without scoring (extensions, pending).
const extra = [...runs.keys()].filter((s) => !required.includes(s)).sort();

const head = ['Scenario', 'Passed', 'Failed', 'Warnings', 'Info/skipped', 'Result'];
const totals = rows.reduce((a, r) => [a[0] + (+r[1] || 0), a[1] + (+r[2] || 0), a[2] + (+r[3] || 0)], [0, 0, 0]);
const scenariosOk = rows.filter((r) => r[5].startsWith('pass')).length;

// Plain-text table on stdout.
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));
console.log(`\n${rows.length} required scenarios; checks: ${totals[0]} passed, ${totals[1]} failed, ${totals[2]} warnings`);
if (extra.length > 0) {
  const notes = extra.map((s) => {
    const t = tally(s);
    return `${s} (${t.passed} passed, ${t.failed} failed)`;
  });
  console.log(`Also run by the requirement set, not scored: ${notes.join('; ')}`);
}

// Markdown for the README.
const md = [
  '# MCP conformance: redmark, 2026-07-28 server scenarios',
  '',
  'redmark (`examples/conformance/redmark.toml`) in front of the legacy, push-style',
  'fixture `examples/conformance_fixture.rs`, checked by `@modelcontextprotocol/conformance`',
  '(`server --requirements 2026-07-28`). Produced by `scripts/conformance.sh`.',
  '',
  `| ${head.join(' | ')} |`,
  `|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
  ...rows.map((r) => `| \`${r[0]}\` | ${r.slice(1).join(' | ')} |`),
  `| **${rows.length} scenarios** | **${totals[0]}** | **${totals[1]}** | **${totals[2]}** | | **${scenariosOk}/${rows.length} pass** |`,
  '',
];
if (extra.length > 0) {
  md.push(
    'Also run by the requirement set but not scored for 2026-07-28 (extensions and pending scenarios):',
    '',
    '| Scenario | Passed | Failed |',
    '|---|---:|---:|',
    ...extra.map((s) => {
      const t = tally(s);
      return `| \`${s}\` | ${t.passed} | ${t.failed} |`;
    }),
    '',
  );
}
if (seconds) md.push(`Suite run time: ${seconds} s.`, '');
writeFileSync(outMd, md.join('\n'));

if (problems.length > 0) {
  console.error('\nUnexpected conformance failures:');
  for (const p of problems) console.error(`  ✗ ${p}`);
}
console.log(`conformance: ${scenariosOk} passed, ${rows.length - scenariosOk} failed`);
process.exit(problems.length > 0 ? 1 : 0);

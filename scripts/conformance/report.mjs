// Summarises the runs of the MCP conformance suite that scripts/conformance.sh
// makes (one per configuration): a table of checks per scenario with a column
// per configuration, printed and written as Markdown, and an exit code that is
// non-zero when
//   - the `legacy` configuration (redmark fronting the legacy fixture) has a
//     FAILURE check that the baseline does not list, or a scenario did not run;
//   - the `redmark-native` configuration fails a scenario that the `native`
//     configuration (the same server, alone) passes, and NATIVE_GAPS does not
//     list it; or a listed one passes.
//
//   node report.mjs REQUIRED_LIST EXPECTED_FAILURES NATIVE_GAPS OUT_MD SECONDS NAME=RESULTS_DIR...
//
// REQUIRED_LIST      file with the required server scenarios, one per line
// EXPECTED_FAILURES  the suite's baseline file (`server:` list of `scenario` or
//                    `scenario:check-id`); a failure listed there is expected
//                    (it applies to the `legacy` column, the one CI holds at 37/37)
// NATIVE_GAPS        `redmark-native:` list of scenarios redmark is known to fail
//                    in front of a native server that passes them alone; listed
//                    ones are reported, not failed, until they pass (then: stale)
// OUT_MD             where the Markdown table goes
// SECONDS            the suites' run time, for the footer
// NAME=RESULTS_DIR   a configuration and the suite's `-o` directory for it
//                    (server-<scenario>-<time>/checks.json); names: native,
//                    redmark-native, legacy (any subset, in column order)
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [requiredFile, baselineFile, gapsFile, outMd, seconds, ...columnArgs] = process.argv.slice(2);
const required = readFileSync(requiredFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);

const TITLES = {
  native: 'native server alone',
  'redmark-native': 'redmark → native',
  legacy: 'redmark → legacy',
};
const ABOUT = {
  native: 'the fixture with `--native --http`: rmcp 3.11 speaking 2026-07-28 itself over stateless Streamable HTTP, no redmark',
  'redmark-native': 'redmark (`examples/conformance/native.toml`, `protocol = "2026-07-28"`) in front of the same native server over stdio; it relays the server\'s own InputRequiredResults, validating answers before the server sees them',
  legacy: 'redmark (`examples/conformance/redmark.toml`) in front of the legacy, push-style fixture; it converts each pushed request into an InputRequiredResult round trip',
};

// Both lists are YAML with one top-level key; the items of `key:` are all we read.
function listIn(file, key) {
  const items = new Set();
  let inKey = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const text = line.replace(/#.*/, '').trimEnd();
    if (/^\S/.test(text)) inKey = text.startsWith(`${key}:`);
    const item = text.match(/^\s+-\s+(\S+)/);
    if (inKey && item) items.add(item[1]);
  }
  return items;
}
const baseline = listIn(baselineFile, 'server');
const gaps = listIn(gapsFile, 'redmark-native');

// The newest result directory of each scenario, per configuration.
const columns = columnArgs.map((arg) => {
  const eq = arg.indexOf('=');
  const name = arg.slice(0, eq);
  const dir = arg.slice(eq + 1);
  const runs = new Map();
  if (existsSync(dir)) {
    for (const d of readdirSync(dir).sort()) {
      const m = d.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
      if (m) runs.set(m[1], join(dir, d, 'checks.json'));
    }
  }
  return { name, runs };
});

function tally(column, scenario) {
  const file = column.runs.get(scenario);
  if (!file) return null;
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  const count = (status) => checks.filter((c) => c.status === status).length;
  const failed = checks.filter((c) => c.status === 'FAILURE');
  const unexpected = baseline.has(scenario)
    ? []
    : failed.filter((c) => !baseline.has(`${scenario}:${c.id}`)).map((c) => c.id);
  return { passed: count('SUCCESS'), failed: failed.length, warnings: count('WARNING'), failedIds: failed.map((c) => c.id), unexpected };
}

const passes = (t) => t !== null && t.failed === 0;
function cell(t) {
  if (!t) return 'NO RESULT';
  const checks = `${t.passed}/${t.passed + t.failed}`;
  if (t.failed > 0) return `FAIL ${checks}`;
  return t.warnings > 0 ? `pass ${checks} (${t.warnings} warn)` : `pass ${checks}`;
}

const byName = Object.fromEntries(columns.map((c) => [c.name, c]));
const problems = [];
const known = [];
const rows = required.map((scenario) => {
  const t = Object.fromEntries(columns.map((c) => [c.name, tally(c, scenario)]));
  if (byName.legacy) {
    const l = t.legacy;
    if (!l) problems.push(`legacy: ${scenario}: no results (the scenario did not run)`);
    else if (l.unexpected.length > 0) problems.push(`legacy: ${scenario}: unexpected failures: ${l.unexpected.join(', ')}`);
  }
  if (byName.native && byName['redmark-native'] && passes(t.native)) {
    const r = t['redmark-native'];
    if (!passes(r) && !gaps.has(scenario)) {
      const why = r ? `failed ${r.failedIds.join(', ')}` : 'no results';
      problems.push(`redmark-native: ${scenario}: the native server passes it alone, through redmark it ${why}`);
    } else if (!passes(r)) {
      known.push(scenario);
    } else if (gaps.has(scenario)) {
      problems.push(`redmark-native: ${scenario}: passes now; remove it from native-gaps.yml`);
    }
  }
  return { scenario, t };
});

const head = ['Scenario', ...columns.map((c) => TITLES[c.name] ?? c.name)];
const cells = rows.map((r) => [r.scenario, ...columns.map((c) => cell(r.t[c.name]))]);
const totals = columns.map((c) => {
  const ts = rows.map((r) => r.t[c.name]);
  const ok = ts.filter(passes).length;
  const checks = ts.reduce((a, t) => [a[0] + (t?.passed ?? 0), a[1] + (t?.failed ?? 0)], [0, 0]);
  return { ok, checks };
});

// Plain-text table on stdout.
const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i]).length)));
const line = (cs) => cs.map((c, i) => String(c).padEnd(widths[i])).join('  ');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of cells) console.log(line(r));
console.log('');
columns.forEach((c, i) => {
  const { ok, checks } = totals[i];
  console.log(`${TITLES[c.name] ?? c.name}: ${ok}/${rows.length} scenarios pass; checks ${checks[0]} passed, ${checks[1]} failed`);
});

// Markdown for the README.
const md = [
  '# MCP conformance: 2026-07-28 server scenarios, three configurations',
  '',
  'Checked by `@modelcontextprotocol/conformance` (`server --requirements 2026-07-28`);',
  'produced by `scripts/conformance.sh`. A cell is the scenario\'s verdict and its',
  'passed/total checks.',
  '',
  ...columns.map((c) => `- **${TITLES[c.name] ?? c.name}**: ${ABOUT[c.name] ?? ''}`),
  '',
  `| ${head.join(' | ')} |`,
  `|${head.map(() => '---').join('|')}|`,
  ...cells.map((r) => `| \`${r[0]}\` | ${r.slice(1).join(' | ')} |`),
  `| **${rows.length} scenarios** | ${totals.map((t) => `**${t.ok}/${rows.length} pass**`).join(' | ')} |`,
  '',
];
if (known.length > 0) {
  md.push(`Known gaps of redmark → native (\`scripts/conformance/native-gaps.yml\`): ${known.map((s) => `\`${s}\``).join(', ')}.`, '');
}
if (seconds) md.push(`Suite run time: ${seconds} s for all configurations.`, '');
writeFileSync(outMd, md.join('\n'));

if (known.length > 0) console.log(`known redmark → native gaps (native-gaps.yml): ${known.join(', ')}`);
if (problems.length > 0) {
  console.error('\nConformance problems:');
  for (const p of problems) console.error(`  ✗ ${p}`);
}
process.exit(problems.length > 0 ? 1 : 0);

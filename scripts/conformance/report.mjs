// Summarises the runs of the MCP conformance suite that scripts/conformance.sh
// makes (one per requirement set and configuration): one table of checks per
// scenario with a column per set and configuration, printed and written as
// Markdown, and an exit code that is non-zero when
//   - a column judged by a baseline (`legacy` in every set, and
//     `redmark-native` in a set without a `native` column) has a FAILURE
//     check the baseline does not list, a listed entry that no longer fails
//     (stale), or a scenario that did not run;
//   - the `redmark-native` column fails a scenario that the `native` column
//     of the same set (the same server, alone) passes, and NATIVE_GAPS does
//     not list it; or a listed one passes.
//
//   node report.mjs --out OUT_MD [--seconds N] [--gaps NATIVE_GAPS]
//       --set SET=REQUIRED_LIST,BASELINE ... --column SET/CONF=RESULTS_DIR ...
//
// --set SET=REQUIRED_LIST,BASELINE
//                    a requirement set (2026-07-28, 2025-11-25): the file with
//                    its required server scenarios, one per line, and its
//                    baseline: the suite's expected-failures YAML, whose
//                    `server:` list (`scenario` or `scenario:check-id`) is the
//                    `legacy` column's; a `redmark-native:` list, in the same
//                    form, is that column's where the set has no `native` one
// --gaps NATIVE_GAPS `redmark-native:` list of scenarios redmark is known to fail
//                    in front of a native server that passes them alone; listed
//                    ones are reported, not failed, until they pass (then: stale)
// --column SET/CONF=RESULTS_DIR
//                    a configuration's run of SET: the suite's `-o` directory
//                    (server-<scenario>-<time>/checks.json); CONF: native,
//                    redmark-native, legacy (columns in the order given)
// --out OUT_MD       where the Markdown table goes
// --seconds N        the suites' run time, for the footer
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const sets = new Map();
const columns = [];
let outMd = null;
let seconds = null;
let gapsFile = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [flag, value] = [argv[i], argv[i + 1]];
  if (value === undefined) throw new Error(`${flag} needs a value`);
  const eq = value.indexOf('=');
  if (flag === '--out') outMd = value;
  else if (flag === '--seconds') seconds = value;
  else if (flag === '--gaps') gapsFile = value;
  else if (flag === '--set') {
    const [requiredFile, baselineFile] = value.slice(eq + 1).split(',');
    sets.set(value.slice(0, eq), { requiredFile, baselineFile });
  } else if (flag === '--column') {
    const [set, conf] = value.slice(0, eq).split('/');
    columns.push({ set, conf, dir: value.slice(eq + 1) });
  } else throw new Error(`unknown argument ${flag}`);
}
if (!outMd) throw new Error('--out is required');

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

// The lists are YAML with top-level keys; the items of `key:` are all we read.
function listIn(file, key) {
  const items = new Set();
  if (!file) return items;
  let inKey = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const text = line.replace(/#.*/, '').trimEnd();
    if (/^\S/.test(text)) inKey = text.startsWith(`${key}:`);
    const item = text.match(/^\s+-\s+(\S+)/);
    if (inKey && item) items.add(item[1]);
  }
  return items;
}
const gaps = listIn(gapsFile, 'redmark-native');

for (const [name, set] of sets) {
  set.required = readFileSync(set.requiredFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);
  set.confs = columns.filter((c) => c.set === name).map((c) => c.conf);
}

// Which baseline judges a column, if any: `server:` for legacy; the
// set's `redmark-native:` list where no native column is there to compare.
function baselineOf(column) {
  const set = sets.get(column.set);
  if (column.conf === 'legacy') return listIn(set.baselineFile, 'server');
  if (column.conf === 'redmark-native' && !set.confs.includes('native')) {
    return listIn(set.baselineFile, 'redmark-native');
  }
  return null;
}

// The newest result directory of each scenario, per column.
for (const column of columns) {
  column.runs = new Map();
  if (existsSync(column.dir)) {
    for (const d of readdirSync(column.dir).sort()) {
      const m = d.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
      if (m) column.runs.set(m[1], join(column.dir, d, 'checks.json'));
    }
  }
  column.baseline = baselineOf(column);
}

function tally(column, scenario) {
  const file = column.runs.get(scenario);
  if (!file) return null;
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  const count = (status) => checks.filter((c) => c.status === status).length;
  const failed = checks.filter((c) => c.status === 'FAILURE');
  return { passed: count('SUCCESS'), failed: failed.length, warnings: count('WARNING'), failedIds: failed.map((c) => c.id) };
}

const passes = (t) => t !== null && t.failed === 0;
function cell(t) {
  if (!t) return 'NO RESULT';
  const checks = `${t.passed}/${t.passed + t.failed}`;
  if (t.failed > 0) return `FAIL ${checks}`;
  return t.warnings > 0 ? `pass ${checks} (${t.warnings} warn)` : `pass ${checks}`;
}
const NOT_REQUIRED = '—';

const problems = [];
const known = [];
// Rows: every scenario of the first set, then those only a later set requires.
const scenarios = [...new Set([...sets.values()].flatMap((s) => s.required))];
const rows = scenarios.map((scenario) => {
  const t = columns.map((c) => (sets.get(c.set).required.includes(scenario) ? tally(c, scenario) : undefined));
  columns.forEach((c, i) => {
    if (t[i] === undefined || !c.baseline) return;
    const where = `${c.set} ${c.conf}: ${scenario}`;
    if (t[i] === null) {
      problems.push(`${where}: no results (the scenario did not run)`);
      return;
    }
    if (c.baseline.has(scenario)) {
      if (passes(t[i])) problems.push(`${where}: passes now; remove it from ${sets.get(c.set).baselineFile}`);
      else known.push(`${c.set} ${TITLES[c.conf]}: \`${scenario}\``);
      return;
    }
    const unexpected = t[i].failedIds.filter((id) => !c.baseline.has(`${scenario}:${id}`));
    if (unexpected.length > 0) problems.push(`${where}: unexpected failures: ${unexpected.join(', ')}`);
    for (const entry of c.baseline) {
      const [s, id] = entry.split(':');
      if (s !== scenario || !id) continue;
      if (t[i].failedIds.includes(id)) known.push(`${c.set} ${TITLES[c.conf]}: \`${entry}\``);
      else problems.push(`${c.set} ${c.conf}: ${entry}: passes now; remove it from ${sets.get(c.set).baselineFile}`);
    }
  });
  // redmark -> native against the same server alone, in the same set.
  for (const [i, c] of columns.entries()) {
    if (c.conf !== 'redmark-native' || t[i] === undefined) continue;
    const n = columns.findIndex((d) => d.set === c.set && d.conf === 'native');
    if (n < 0 || !passes(t[n])) continue;
    const r = t[i];
    if (!passes(r) && !gaps.has(scenario)) {
      const why = r ? `failed ${r.failedIds.join(', ')}` : 'no results';
      problems.push(`${c.set} redmark-native: ${scenario}: the native server passes it alone, through redmark it ${why}`);
    } else if (!passes(r)) {
      known.push(`${c.set} ${TITLES[c.conf]} (native-gaps.yml): \`${scenario}\``);
    } else if (gaps.has(scenario)) {
      problems.push(`${c.set} redmark-native: ${scenario}: passes now; remove it from native-gaps.yml`);
    }
  }
  return { scenario, t };
});

const title = (c) => `${TITLES[c.conf] ?? c.conf} (${c.set})`;
const head = ['Scenario', ...columns.map(title)];
const cells = rows.map((r) => [r.scenario, ...r.t.map((t) => (t === undefined ? NOT_REQUIRED : cell(t)))]);
const totals = columns.map((c, i) => {
  const ts = rows.map((r) => r.t[i]).filter((t) => t !== undefined);
  const ok = ts.filter(passes).length;
  const checks = ts.reduce((a, t) => [a[0] + (t?.passed ?? 0), a[1] + (t?.failed ?? 0)], [0, 0]);
  return { ok, of: sets.get(c.set).required.length, checks };
});

// Plain-text table on stdout.
const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i]).length)));
const line = (cs) => cs.map((c, i) => String(c).padEnd(widths[i])).join('  ');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of cells) console.log(line(r));
console.log('');
columns.forEach((c, i) => {
  const { ok, of, checks } = totals[i];
  console.log(`${title(c)}: ${ok}/${of} scenarios pass; checks ${checks[0]} passed, ${checks[1]} failed`);
});

// Markdown for the book (docs/src/results/conformance.md).
const setNames = [...sets.keys()];
const md = [
  `# MCP conformance: ${setNames.join(' and ')} server scenarios`,
  '',
  `Checked by \`@modelcontextprotocol/conformance\` (\`server --requirements SET\`, for ${setNames.map((s) => `\`${s}\``).join(' and ')});`,
  'produced by `scripts/conformance.sh`. A cell is the scenario\'s verdict and its',
  `passed/total checks; ${NOT_REQUIRED} where the set does not require the scenario.`,
  '',
  ...[...new Set(columns.map((c) => c.conf))].map((conf) => `- **${TITLES[conf] ?? conf}**: ${ABOUT[conf] ?? ''}`),
  '',
];
if (sets.has('2025-11-25') && !columns.some((c) => c.set === '2025-11-25' && c.conf === 'native')) {
  md.push('In the 2025-11-25 columns the client is 2025-era (`initialize`, `Mcp-Session-Id`): redmark serves its session and pushes each question on the call\'s stream. No such column for the native server alone: it speaks 2026-07-28 only.', '');
}
md.push(
  `| ${head.join(' | ')} |`,
  `|${head.map(() => '---').join('|')}|`,
  ...cells.map((r) => `| \`${r[0]}\` | ${r.slice(1).join(' | ')} |`),
  `| **${scenarios.length} scenarios** | ${totals.map((t) => `**${t.ok}/${t.of} pass**`).join(' | ')} |`,
  '',
);
if (known.length > 0) md.push(`Known failures (baselines): ${known.join('; ')}.`, '');
if (seconds) md.push(`Suite run time: ${seconds} s for all sets and configurations.`, '');
writeFileSync(outMd, md.join('\n'));

if (known.length > 0) console.log(`known failures (baselines): ${known.join('; ').replaceAll('`', '')}`);
if (problems.length > 0) {
  console.error('\nConformance problems:');
  for (const p of problems) console.error(`  ✗ ${p}`);
}
process.exit(problems.length > 0 ? 1 : 0);

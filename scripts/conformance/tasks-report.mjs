// Summarises scripts/conformance.sh's run of the suite's `tasks-*` scenarios
// (the tasks extension's, which the suite does not score): one table of
// checks passed/total per scenario and configuration, printed and written
// as Markdown, with every failed check listed under it. Scenario failures
// are what the table is for, not an error; the exit code is non-zero only
// when a scenario left no results in a configuration (the suite could not
// run it at all).
//
//   node tasks-report.mjs --out OUT_MD --scenarios LIST [--seconds N]
//       --column CONF=RESULTS_DIR ...
//
// --scenarios LIST   the tasks-* scenarios, one per line
// --column CONF=DIR  a configuration's run: the suite's `-o` directory
//                    (server-<scenario>-<time>/checks.json), in column order
// --out OUT_MD       where the Markdown goes
// --seconds N        the suite's run time, for the footer
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const columns = [];
let outMd = null;
let seconds = null;
let scenariosFile = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [flag, value] = [argv[i], argv[i + 1]];
  if (value === undefined) throw new Error(`${flag} needs a value`);
  if (flag === '--out') outMd = value;
  else if (flag === '--seconds') seconds = value;
  else if (flag === '--scenarios') scenariosFile = value;
  else if (flag === '--column') {
    const eq = value.indexOf('=');
    columns.push({ conf: value.slice(0, eq), dir: value.slice(eq + 1) });
  } else throw new Error(`unknown argument ${flag}`);
}
if (!outMd || !scenariosFile) throw new Error('--out and --scenarios are required');
const scenarios = readFileSync(scenariosFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);

const ABOUT = {
  native: 'the fixture with `--native --http` alone: rmcp 3.11 serving the extension itself (`TaskManager`)',
  'redmark-native': 'redmark (`examples/conformance/native.toml`) in front of the same native server, on a route without `[route.tasks]`: tasks are withheld, not relayed',
  'redmark-native-tasks': 'redmark (`examples/conformance/native-tasks.toml`) in front of the same native server, on a route with `[route.tasks]`: the server\'s own tasks relayed under wrapped ids',
  legacy: 'redmark (`examples/conformance/redmark.toml`) in front of the legacy fixture, on a route without `[route.tasks]`: no tasks',
  'redmark-tasks': 'redmark (`examples/conformance/tasks.toml`) in front of the legacy fixture with gateway-made tasks (`[route.tasks]`, `policies/conformance-tasks.toml`)',
};

// The newest result directory of each scenario, per column.
for (const column of columns) {
  column.runs = new Map();
  if (existsSync(column.dir)) {
    for (const d of readdirSync(column.dir).sort()) {
      const m = d.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
      if (m) column.runs.set(m[1], join(column.dir, d, 'checks.json'));
    }
  }
}

function tally(column, scenario) {
  const file = column.runs.get(scenario);
  if (!file || !existsSync(file)) return null;
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  const with_ = (status) => checks.filter((c) => c.status === status);
  return {
    passed: with_('SUCCESS').length,
    failed: with_('FAILURE').map((c) => ({ id: c.id, why: c.errorMessage ?? '' })),
    other: checks.length - with_('SUCCESS').length - with_('FAILURE').length,
  };
}

const missing = [];
const rows = scenarios.map((scenario) => ({
  scenario,
  t: columns.map((c) => {
    const t = tally(c, scenario);
    if (!t) missing.push(`${c.conf}: ${scenario}`);
    return t;
  }),
}));
const cell = (t) => (t ? `${t.passed}/${t.passed + t.failed.length}` : 'NO RESULT');

// Plain-text table on stdout.
const head = ['scenario', ...columns.map((c) => c.conf)];
const cells = rows.map((r) => [r.scenario, ...r.t.map(cell)]);
const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
const line = (cs) => cs.map((c, i) => c.padEnd(widths[i])).join('  ');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of cells) console.log(line(r));

const sum = (i) => rows.reduce((a, r) => [a[0] + (r.t[i]?.passed ?? 0), a[1] + (r.t[i] ? r.t[i].passed + r.t[i].failed.length : 0)], [0, 0]);
const md = [
  '# MCP conformance: the tasks extension\'s scenarios',
  '',
  'The suite\'s `tasks-*` server scenarios (forced: the suite does not score an',
  'extension), run by `scripts/conformance.sh --tasks`. A cell is checks passed/total',
  '(checks that neither pass nor fail, such as the skipped `tasks-status-notifications`, are not counted).',
  '',
  ...columns.map((c) => `- **${c.conf}**: ${ABOUT[c.conf] ?? ''}`),
  '',
  `| ${head.join(' | ')} |`,
  `|${head.map(() => '---').join('|')}|`,
  ...cells.map((r) => `| \`${r[0]}\` | ${r.slice(1).join(' | ')} |`),
  `| **all** | ${columns.map((_, i) => `**${sum(i).join('/')}**`).join(' | ')} |`,
  '',
  '## Failed checks',
  '',
];
for (const [i, c] of columns.entries()) {
  const failed = rows.flatMap((r) => (r.t[i]?.failed ?? []).map((f) => `- \`${r.scenario}\` \`${f.id}\`: ${f.why.replaceAll('\n', ' ')}`));
  md.push(`### ${c.conf}`, '', ...(failed.length > 0 ? failed : ['None.']), '');
}
if (seconds) md.push(`Suite run time: ${seconds} s for all configurations.`, '');
writeFileSync(outMd, md.join('\n'));

console.log('');
columns.forEach((c, i) => console.log(`${c.conf}: checks ${sum(i).join('/')} passed`));
if (missing.length > 0) {
  console.error(`\nThe suite left no results for: ${missing.join('; ')}`);
  process.exit(1);
}

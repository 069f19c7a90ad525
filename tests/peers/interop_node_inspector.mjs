// The MCP Inspector CLI 2.x in tests/peers/interop_node.mjs: LIB
// `inspector-legacy`, `inspector-auto` or `inspector-modern` runs
// `inspector --cli TARGET --method ... --protocol-era ERA --format json -q`,
// one process (so one session, never DELETEd) per request, as its users do.
// The CLI has no elicitation handler and declares no elicitation (a question
// pushed anyway is answered `cancel`): `reask` and `run_out` are "unsupported".
// `sessions` runs in the legacy era (the default of ad-hoc runs) only.

import { join } from 'node:path';

export function inspector(lib, { cache, emit, cell, Unsupported, Skipped, sessions, SESSIONS_TIMEOUT, spawn }) {
  const era = /^inspector-(legacy|auto|modern)$/.exec(lib)?.[1];
  if (!era) throw new Error(`unknown LIB ${lib}`);
  const SKIPPED = 'run in the legacy era, in front of the HTTP server only';
  const launcher = join(cache, 'npm-interop/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');

  /** One CLI run: its exit code and its JSON output (result or error). */
  function cli(target, args) {
    const targetArgs = typeof target === 'string' ? [target] : target;
    const argv = [launcher, '--cli', ...targetArgs, ...args, '--protocol-era', era, '--format', 'json', '-q'];
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (code) => {
        const text = out.trim() || err.trim();
        let json;
        try {
          json = JSON.parse(text.split('\n')[0]);
        } catch {
          json = { error: { message: text } };
        }
        resolve({ code, json });
      });
    });
  }

  const call = async (target, name, args) => {
    const pairs = Object.entries(args).flatMap(([k, v]) => ['--tool-arg', `${k}=${v}`]);
    const { json } = await cli(target, ['--method', 'tools/call', '--tool-name', name, ...pairs]);
    if (json.error) return [true, json.error.message ?? JSON.stringify(json.error)];
    return [Boolean(json.result.isError), (json.result.content ?? []).map((c) => c.text ?? '').join('\n')];
  };
  const result = (json) => {
    if (json.error) throw new Error(json.error.message ?? JSON.stringify(json.error));
    return json.result;
  };

  return {
    async run(mode, target) {
      emit('negotiated', 'pass', { version: null, elicitation: false, era });
      await cell('list', async () => {
        const names = result((await cli(target, ['--method', 'tools/list'])).json).tools.map((t) => t.name);
        return [['echo', 'fail', 'ask'].every((n) => names.includes(n)) ? 'pass' : 'fail', names.sort()];
      });
      await cell('call', async () => {
        const [isError, text] = await call(target, 'echo', { text: 'hi' });
        return [!isError && text === 'echo: hi' ? 'pass' : 'fail', text];
      });
      await cell('tool_error', async () => {
        const [isError, text] = await call(target, 'fail', { text: 'x' });
        return [isError && text.includes('failed on purpose') ? 'pass' : 'fail', text];
      });
      await cell('resource', async () => {
        const r = result((await cli(target, ['--method', 'resources/read', '--uri', 'note://hello'])).json);
        const text = r.contents.map((c) => c.text ?? '').join('\n');
        return [text.includes('hello from the fixture') ? 'pass' : 'fail', text];
      });
      await cell('prompt', async () => {
        const r = result((await cli(target, ['--method', 'prompts/get', '--prompt-name', 'greet', '--prompt-args', 'name=Ada'])).json);
        const text = r.messages.map((m) => m.content?.text ?? '').join('\n');
        return [text.includes('Hello, Ada!') ? 'pass' : 'fail', text];
      });
      await cell('reask', async () => {
        throw new Unsupported('no elicitation handler');
      });
      await cell('run_out', async () => {
        throw new Unsupported('no elicitation handler');
      });
      // It declares no elicitation; a server that pushes a question anyway
      // (straight, in the control) hears `cancel`.
      await cell('no_elicitation', async () => {
        const [isError, text] = await call(target, 'ask', { tag: 'bare' });
        const cancelled = mode === 'control' && text.includes('"action": "cancel"');
        return [isError || cancelled ? 'pass' : 'fail', { result: text }];
      });
      // Five commands, each starting a stdio server of its own in the control.
      await cell(
        'after',
        async () => {
          const texts = [];
          for (let i = 0; i < 5; i++) texts.push((await call(target, 'echo', { text: `after ${i}` }))[1]);
          return [texts.every((t, i) => t === `echo: after ${i}`) ? 'pass' : 'fail', texts];
        },
        SESSIONS_TIMEOUT,
      );
      await cell(
        'sessions',
        async () => {
          if (!process.env.INTEROP_SESSIONS || era !== 'legacy') throw new Skipped(SKIPPED);
          return sessions(async (i) => {
            const [isError, text] = await call(target, 'echo', { text: `session ${i}` });
            return isError || text !== `echo: session ${i}` ? text : null;
          });
        },
        SESSIONS_TIMEOUT,
      );
    },
  };
}

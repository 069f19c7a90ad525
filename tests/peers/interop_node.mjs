// One Node MCP client (library or CLI) through the cells of the client matrix
// (tests/interop_clients.rs), used as its own users use it and without any LLM.
//
//     node interop_node.mjs LIB MODE TARGET [MODE TARGET]...
//
// LIB     sdk1 (npm @modelcontextprotocol/sdk 1.x Client), client2 (npm
//         @modelcontextprotocol/client 2.x Client, default version negotiation),
//         aisdk (npm @ai-sdk/mcp createMCPClient), mcp-remote (mcp-remote's proxy
//         driven over stdio by the sdk 1.x Client as its host),
//         inspector-legacy | inspector-auto | inspector-modern (Inspector CLI 2.x,
//         one process per request, --protocol-era ERA)
// MODE    control (straight at the server) or redmark (through the gateway)
// TARGET  a URL, or a JSON list: the stdio command of the server
//
// Prints the same lines as tests/peers/interop_py.py ({"mode", "cell", "status",
// "detail"}), plus `sessions` for the clients that never DELETE their session:
// 70 sessions opened, used and closed, four at a time (the per-principal
// default is 64), when env INTEROP_SESSIONS is set (redmark's front sessions
// are the same whatever the server: the test sets it for the HTTP row only). Env REDMARK_CACHE: the repository's .cache folder.

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { inspector } from './interop_node_inspector.mjs';

const cache = process.env.REDMARK_CACHE;
const npm = createRequire(join(cache, 'npm', 'package.json'));
const interop = createRequire(join(cache, 'npm-interop', 'package.json'));
const CELL_TIMEOUT = 40_000;
const SESSIONS = 70;
const SESSIONS_TIMEOUT = 180_000;
let MODE = 'control';

function emit(cell, status, fields = {}) {
  process.stdout.write(JSON.stringify({ mode: MODE, cell, status, ...fields }) + '\n');
}

export class Unsupported extends Error {}
/** A cell not run in this row (it is run in another; see `sessions`). */
export class Skipped extends Error {}

const textOf = (content) => (content ?? []).map((c) => (c.text !== undefined ? c.text : JSON.stringify(c))).join('\n');
const errorText = (e) => `${e?.constructor?.name ?? 'Error'}: ${e?.message ?? String(e)}`;

/** A face over a Client of the npm SDK (1.x or 2.x) or of @ai-sdk/mcp. */
function face(client, version, close) {
  return {
    version,
    close,
    tools: async () => (await client.listTools()).tools.map((t) => t.name),
    call: async (name, args) => {
      const r = await client.callTool({ name, arguments: args });
      return [Boolean(r.isError), textOf(r.content)];
    },
    read: async (uri) => (await client.readResource({ uri })).contents.map((c) => c.text ?? '').join('\n'),
    prompt: async (name, args) => (await client.getPrompt({ name, arguments: args })).messages.map((m) => textOf([m.content])).join('\n'),
  };
}

const onElicit = (answer) => async (request) => answer(request.params.message);

const LIBS = {
  sdk1: {
    elicitation: true,
    neverDeletes: true,
    async open(target, answer) {
      const { Client } = npm('@modelcontextprotocol/sdk/client/index.js');
      const { ElicitRequestSchema } = npm('@modelcontextprotocol/sdk/types.js');
      const client = new Client({ name: 'interop-sdk1', version: '0' }, { capabilities: answer ? { elicitation: {} } : {} });
      if (answer) client.setRequestHandler(ElicitRequestSchema, onElicit(answer));
      let transport;
      if (typeof target === 'string') {
        const { StreamableHTTPClientTransport } = npm('@modelcontextprotocol/sdk/client/streamableHttp.js');
        transport = new StreamableHTTPClientTransport(new URL(target));
      } else {
        const { StdioClientTransport } = npm('@modelcontextprotocol/sdk/client/stdio.js');
        transport = new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: 'ignore' });
      }
      await client.connect(transport);
      return face(client, () => transport.protocolVersion ?? null, () => client.close());
    },
  },
  client2: {
    elicitation: true,
    async open(target, answer) {
      const { Client, StreamableHTTPClientTransport } = npm('@modelcontextprotocol/client');
      const { StdioClientTransport } = npm('@modelcontextprotocol/client/stdio');
      const client = new Client({ name: 'interop-client2', version: '0' }, { capabilities: answer ? { elicitation: { form: {} } } : {} });
      if (answer) client.setRequestHandler('elicitation/create', onElicit(answer));
      const transport =
        typeof target === 'string'
          ? new StreamableHTTPClientTransport(new URL(target))
          : new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: 'ignore' });
      await client.connect(transport);
      return face(client, () => client.getNegotiatedProtocolVersion() ?? null, () => client.close());
    },
  },
  aisdk: {
    elicitation: true,
    async open(target, answer) {
      const { createMCPClient, ElicitationRequestSchema } = interop('@ai-sdk/mcp');
      let transport;
      if (typeof target === 'string') {
        transport = { type: 'http', url: target };
      } else {
        const { Experimental_StdioMCPTransport } = interop('@ai-sdk/mcp/mcp-stdio');
        transport = new Experimental_StdioMCPTransport({ command: target[0], args: target.slice(1), stderr: 'ignore' });
      }
      const client = await createMCPClient({ transport, capabilities: answer ? { elicitation: {} } : {} });
      if (answer) client.onElicitationRequest(ElicitationRequestSchema, onElicit(answer));
      return face(client, () => client.initializeResult?.protocolVersion ?? null, () => client.close());
    },
  },
  'mcp-remote': {
    elicitation: true,
    neverDeletes: true,
    async open(target, answer) {
      if (typeof target !== 'string') throw new Unsupported('mcp-remote proxies a URL, not a stdio server');
      const proxy = join(cache, 'npm-interop/node_modules/mcp-remote/dist/proxy.js');
      const host = [process.execPath, proxy, target, '--allow-http', '--transport', 'http-only', '--silent'];
      return LIBS.sdk1.open(host, answer);
    },
  },
};

async function cell(name, run, within = CELL_TIMEOUT) {
  let status;
  let detail;
  let timer;
  try {
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${within} ms`)), within);
    });
    [status, detail] = await Promise.race([run(), timeout]);
  } catch (e) {
    if (e instanceof Unsupported) [status, detail] = ['unsupported', e.message];
    else if (e instanceof Skipped) [status, detail] = ['skipped', e.message];
    else [status, detail] = ['fail', errorText(e)];
  } finally {
    clearTimeout(timer);
  }
  emit(name, status, { detail });
}

/** SESSIONS sessions, four at a time (each `one(i)` opens, calls, closes
 * and returns null or what went wrong); the cell's status and detail. */
export async function sessions(one) {
  const failures = [];
  const each = async (i) => {
    try {
      const wrong = await one(i);
      if (wrong !== null) failures.push(`${i}: ${wrong}`);
    } catch (e) {
      failures.push(`${i}: ${errorText(e)}`);
    }
  };
  for (let i = 0; i < SESSIONS; i += 4) {
    await Promise.all([i, i + 1, i + 2, i + 3].filter((n) => n < SESSIONS).map(each));
  }
  return [failures.length === 0 ? 'pass' : 'fail', { sessions: SESSIONS, failed: failures.length, failures: failures.slice(0, 5) }];
}

async function callOutcome(client, tool, args) {
  try {
    return await client.call(tool, args);
  } catch (e) {
    if (e instanceof Unsupported) throw e;
    return [true, errorText(e)];
  }
}

async function mainCells(lib, mode, target) {
  const answers = { names: [], seen: [] };
  const answer = (message) => {
    answers.seen.push(message);
    const name = answers.names.length > 1 ? answers.names.shift() : answers.names[0];
    return { action: 'accept', content: { name } };
  };
  const asks = lib.elicitation;
  const client = await lib.open(target, asks ? answer : null);
  emit('negotiated', 'pass', { version: client.version(), elicitation: asks });
  await cell('list', async () => {
    const names = await client.tools();
    return [['echo', 'fail', 'ask'].every((n) => names.includes(n)) ? 'pass' : 'fail', names.sort()];
  });
  await cell('call', async () => {
    const [isError, text] = await client.call('echo', { text: 'hi' });
    return [!isError && text.includes('echo: hi') ? 'pass' : 'fail', text];
  });
  await cell('tool_error', async () => {
    const [isError, text] = await callOutcome(client, 'fail', { text: 'x' });
    return [isError && text.includes('failed on purpose') ? 'pass' : 'fail', text];
  });
  await cell('resource', async () => {
    const text = await client.read('note://hello');
    return [text.includes('hello from the fixture') ? 'pass' : 'fail', text];
  });
  await cell('prompt', async () => {
    const text = await client.prompt('greet', { name: 'Ada' });
    return [text.includes('Hello, Ada!') ? 'pass' : 'fail', text];
  });
  await cell('reask', async () => {
    if (!asks) throw new Unsupported('no elicitation handler API');
    answers.names = ['ada', 'Ada'];
    answers.seen = [];
    const [isError, text] = await callOutcome(client, 'ask', { tag: 'reask' });
    const seen = answers.seen;
    const ok =
      mode === 'control'
        ? !isError && text.includes('"ada"') && seen.length === 1
        : !isError && text.includes('"Ada"') && seen.length === 2 && seen[1] !== seen[0];
    return [ok ? 'pass' : 'fail', { result: text, asked: seen }];
  });
  await cell('run_out', async () => {
    if (!asks) throw new Unsupported('no elicitation handler API');
    if (mode === 'control') throw new Unsupported('no policy without redmark');
    answers.names = ['ada'];
    answers.seen = [];
    const [isError, text] = await callOutcome(client, 'ask', { tag: 'run-out' });
    const ok = isError && answers.seen.length === 2 && !text.includes('"tag"');
    return [ok ? 'pass' : 'fail', { result: text, asked: answers.seen }];
  });
  await cell('no_elicitation', async () => {
    const bare = await lib.open(target, null);
    try {
      const [isError, text] = await callOutcome(bare, 'ask', { tag: 'bare' });
      return [isError ? 'pass' : 'fail', { result: text, version: bare.version() }];
    } finally {
      await bare.close();
    }
  });
  await cell('after', async () => {
    const texts = [];
    for (let i = 0; i < 5; i++) texts.push((await callOutcome(client, 'echo', { text: `after ${i}` }))[1]);
    return [texts.every((t, i) => t === `echo: after ${i}`) ? 'pass' : 'fail', texts];
  });
  await client.close();
  if (lib.neverDeletes) {
    await cell('sessions', async () => {
      // redmark's front sessions are the same whatever the server: the HTTP row only.
      if (!process.env.INTEROP_SESSIONS) throw new Skipped('run in front of the HTTP server only');
      return sessions(async (i) => {
        const c = await lib.open(target, null);
        const [isError, text] = await c.call('echo', { text: `session ${i}` });
        await c.close();
        return isError || text !== `echo: session ${i}` ? text : null;
      });
    }, SESSIONS_TIMEOUT);
  }
}

async function main(argv) {
  const lib = LIBS[argv[0]] ?? inspector(argv[0], { cache, emit, cell, Unsupported, Skipped, sessions, SESSIONS_TIMEOUT, spawn });
  for (let i = 1; i + 1 < argv.length; i += 2) {
    MODE = argv[i];
    const target = argv[i + 1].startsWith('http') ? argv[i + 1] : JSON.parse(argv[i + 1]);
    try {
      await (lib.run ? lib.run(MODE, target) : mainCells(lib, MODE, target));
    } catch (e) {
      emit('connect', 'fail', { detail: errorText(e) });
    }
  }
}

await main(process.argv.slice(2));
process.exit(0);

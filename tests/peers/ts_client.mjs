// Scripted MCP client driver (npm @modelcontextprotocol/client 2.4.0) for redmark's
// integration tests; the Node counterpart of tests/peers/py_client.py.
//
//     node tests/peers/ts_client.mjs URL SCRIPT_JSON
//
// The client package is loaded from <repo>/.cache/npm (scripts/setup-test-deps.sh), or
// from $REDMARK_NPM_DIR. SCRIPT_JSON is JSON text, `@path` to read it from a file, or `-`
// for stdin. It is either a list of steps, or an object:
//
//     {
//       "steps": [ STEP, ... ],                      // required
//       "elicitation": [ ANSWER, ... ],              // optional; see below
//       "headers": {"Authorization": "Bearer ..."},  // optional; sent on every HTTP request
//       "mode": "2026-07-28",                        // optional: "2026-07-28" (default: versionNegotiation
//                                                    //   {mode: {pin}}), "auto" or "legacy"
//       "capabilities": {...},                       // optional; overrides the declared capabilities
//       "timeout": 30,                               // optional per-request timeout, seconds
//       "client_info": {"name": "...", "version": "..."}  // optional
//     }
//
// STEP is one of
//     {"op": "list_tools"}                 {"op": "call_tool", "name": "echo", "arguments": {...}}
//     {"op": "discover"}                   {"op": "list_prompts"}     {"op": "list_resources"}
//     {"op": "read_resource", "uri": ...}  {"op": "get_prompt", "name": ..., "arguments": {...}}
// Any step may carry "id": anything (echoed back on its output line). Lists bypass the
// client's response cache, so every step reaches the server.
//
// ANSWER is {"action": "accept", "content": {...}} | {"action": "decline"} | {"action": "cancel"}
// | {"error": {"code": -32600, "message": "..."}}; the `elicitation/create` handler answers
// requests in order (it serves both pushed requests and the embedded input requests of a
// 2026-07-28 InputRequiredResult, which the SDK fulfils and retries automatically). If the
// "elicitation" key is absent no handler is registered and the client declares NO elicitation
// capability; present (even as []) it declares {"form": {}}. A request that arrives after the
// queue is used up is answered "cancel" (its output line says "exhausted": true).
//
// Output: one JSON line per event on stdout, in the order they happen:
//     {"event": "connected", "protocolVersion": .., "serverInfo": {...}, "capabilities": {...}}
//     {"step": i, "op": .., "ok": true,  "result": {...}}
//     {"step": i, "op": .., "ok": false, "error": {"code": .., "message": .., "data": .., "type": ..}}
//     {"event": "elicitation", "key": .., "message": .., "requestedSchema": .., "mode": .., "params": {...}, "answer": {...}}
//     {"event": "fatal", "error": {...}}                     // connecting failed or the connection broke
// "key" is the request's id as the handler sees it: the inputRequests key on 2026-07-28, the
// JSON-RPC id of a pushed request on a legacy connection. SdkError codes are strings.
//
// Exit status: 0 whenever the script ran (step errors are lines, not exit codes); 2 for bad
// arguments or an unparseable script.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const npmDir = process.env.REDMARK_NPM_DIR ?? fileURLToPath(new URL('../../.cache/npm/', import.meta.url));
const require = createRequire(join(npmDir, 'package.json'));
const { Client, StreamableHTTPClientTransport, ProtocolError } = require('@modelcontextprotocol/client');

const OPS = new Set(['list_tools', 'call_tool', 'discover', 'list_prompts', 'list_resources', 'read_resource', 'get_prompt']);

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function errorOf(e) {
  const err = { code: e?.code ?? null, message: e?.message ?? String(e), type: e?.constructor?.name ?? typeof e };
  if (e?.data !== undefined) err.data = e.data;
  return err;
}

function loadScript(arg) {
  const text = arg === '-' ? readFileSync(0, 'utf8') : arg.startsWith('@') ? readFileSync(arg.slice(1), 'utf8') : arg;
  let script = JSON.parse(text);
  if (Array.isArray(script)) script = { steps: script };
  if (script === null || typeof script !== 'object' || !Array.isArray(script.steps)) {
    throw new Error("script must be a list of steps or an object with a 'steps' list");
  }
  for (const step of script.steps) {
    if (step === null || typeof step !== 'object' || !OPS.has(step.op)) {
      throw new Error(`bad step ${JSON.stringify(step)}: op must be one of ${[...OPS].sort().join(', ')}`);
    }
  }
  return script;
}

function versionMode(mode) {
  if (mode === undefined || mode === '2026-07-28') return { pin: '2026-07-28' };
  if (mode === 'auto' || mode === 'legacy') return mode;
  throw new Error(`unknown mode ${JSON.stringify(mode)}`);
}

async function runStep(client, step, options) {
  const bypass = { ...options, cacheMode: 'bypass' };
  switch (step.op) {
    case 'list_tools':
      return client.listTools(step.cursor ? { cursor: step.cursor } : undefined, bypass);
    case 'call_tool':
      return client.callTool({ name: step.name, arguments: step.arguments ?? {} }, options);
    case 'discover':
      return client.discover(options);
    case 'list_prompts':
      return client.listPrompts(step.cursor ? { cursor: step.cursor } : undefined, bypass);
    case 'list_resources':
      return client.listResources(step.cursor ? { cursor: step.cursor } : undefined, bypass);
    case 'read_resource':
      return client.readResource({ uri: step.uri }, bypass);
    case 'get_prompt':
      return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, options);
  }
  throw new Error(`unknown op ${step.op}`); // loadScript rejects these up front
}

async function run(url, script) {
  const elicit = Object.hasOwn(script, 'elicitation');
  const capabilities = script.capabilities ?? (elicit ? { elicitation: { form: {} } } : {});
  const info = script.client_info ?? { name: 'redmark-ts-client', version: '0' };
  const client = new Client(info, { capabilities, versionNegotiation: { mode: versionMode(script.mode) } });
  if (elicit) {
    const answers = [...(script.elicitation ?? [])];
    client.setRequestHandler('elicitation/create', async (request, ctx) => {
      const p = request.params ?? {};
      const exhausted = answers.length === 0;
      const answer = exhausted ? { action: 'cancel' } : answers.shift();
      const line = {
        event: 'elicitation',
        key: ctx?.mcpReq?.id ?? request.id ?? null,
        message: p.message ?? null,
        requestedSchema: p.requestedSchema ?? null,
        mode: p.mode ?? null,
        params: p,
        answer,
      };
      if (exhausted) line.exhausted = true;
      emit(line);
      if (answer.error) {
        throw new ProtocolError(answer.error.code ?? -32603, answer.error.message ?? '', answer.error.data);
      }
      return answer.content === undefined ? { action: answer.action } : { action: answer.action, content: answer.content };
    });
  }
  const requestInit = script.headers ? { headers: script.headers } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
  const options = script.timeout != null ? { timeout: Number(script.timeout) * 1000 } : {};
  try {
    await client.connect(transport, options);
  } catch (e) {
    emit({ event: 'fatal', error: errorOf(e) });
    return;
  }
  emit({
    event: 'connected',
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
  });
  try {
    for (const [i, step] of script.steps.entries()) {
      const line = { step: i, op: step.op };
      if (Object.hasOwn(step, 'id')) line.id = step.id;
      try {
        const result = await runStep(client, step, options);
        emit({ ...line, ok: true, result });
      } catch (e) {
        emit({ ...line, ok: false, error: errorOf(e) });
      }
    }
  } finally {
    await client.close().catch(() => {});
  }
}

async function main(argv) {
  if (argv.length !== 2) {
    process.stderr.write('usage: ts_client.mjs URL SCRIPT_JSON|@file|-\n');
    return 2;
  }
  let script;
  try {
    script = loadScript(argv[1]);
    versionMode(script.mode);
  } catch (e) {
    process.stderr.write(`ts_client.mjs: bad script: ${e.message}\n`);
    return 2;
  }
  try {
    await run(argv[0], script);
  } catch (e) {
    emit({ event: 'fatal', error: errorOf(e) });
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));

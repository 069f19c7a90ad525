// Scripted 2025-era MCP client driver (npm @modelcontextprotocol/sdk 1.32.2 `Client` over
// `StreamableHTTPClientTransport`) for redmark's integration tests; the Node counterpart of
// tests/peers/py_client_2025.py, with the same script and output.
//
//     node tests/peers/ts_client_2025.mjs URL SCRIPT_JSON
//
// It opens a session (`initialize`, `Mcp-Session-Id`), runs the steps, and ends the session
// with DELETE. SCRIPT_JSON is JSON text, `@path`, or `-` for stdin:
//
//     { "steps": [ STEP, ... ], "elicitation": [ ANSWER, ... ], "headers": {...} }
//
// STEP: {"op": "list_tools"} | {"op": "call_tool", "name": ..., "arguments": {...}}
//       | {"op": "ping"} | {"op": "set_level", "level": "debug"} | {"op": "list_prompts"}
//       | {"op": "get_prompt", ...} | {"op": "list_resources"} | {"op": "read_resource", "uri": ...}
// ANSWER: {"action": "accept", "content": {...}} | {"action": "decline"} | {"action": "cancel"};
// answered in order, "cancel" once used up. Present (even []), "elicitation" declares the
// capability ({} as 2025-06-18 clients do, form mode).
//
// Output, one JSON line per event: {"event": "initialized", "result": {...}, "session": "..."},
// {"step": i, "op": .., "ok": true|false, "result"|"error": ..},
// {"event": "elicitation", "key": <the pushed request's id>, "message": .., "requestedSchema": .., "params": {...}, "answer": {...}},
// {"event": "fatal", "error": {...}}.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const npmDir = process.env.REDMARK_NPM_DIR ?? fileURLToPath(new URL('../../.cache/npm/', import.meta.url));
const require = createRequire(join(npmDir, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function errorOf(e) {
  // The SDK's McpError prefixes the server's message with "MCP error CODE: ".
  let message = e?.message ?? String(e);
  const prefix = `MCP error ${e?.code}: `;
  if (typeof message === 'string' && message.startsWith(prefix)) message = message.slice(prefix.length);
  const err = { code: e?.code ?? null, message, type: e?.constructor?.name ?? typeof e };
  if (e?.data !== undefined) err.data = e.data;
  return err;
}

async function runStep(client, step) {
  switch (step.op) {
    case 'list_tools': return client.listTools();
    case 'call_tool': return client.callTool({ name: step.name, arguments: step.arguments ?? {} });
    case 'ping': return client.ping();
    case 'set_level': return client.setLoggingLevel(step.level);
    case 'list_prompts': return client.listPrompts();
    case 'get_prompt': return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} });
    case 'list_resources': return client.listResources();
    case 'read_resource': return client.readResource({ uri: step.uri });
  }
  throw new Error(`unknown op ${step.op}`);
}

async function run(url, script) {
  const elicit = Object.hasOwn(script, 'elicitation');
  const client = new Client(
    { name: 'redmark-ts-client-2025', version: '0' },
    { capabilities: elicit ? { elicitation: {} } : {} },
  );
  if (elicit) {
    const answers = [...(script.elicitation ?? [])];
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      const p = request.params ?? {};
      const answer = answers.length === 0 ? { action: 'cancel' } : answers.shift();
      emit({
        event: 'elicitation',
        key: extra?.requestId ?? null,
        message: p.message ?? null,
        requestedSchema: p.requestedSchema ?? null,
        mode: p.mode ?? null,
        params: p,
        answer,
      });
      return answer.content === undefined ? { action: answer.action } : { action: answer.action, content: answer.content };
    });
  }
  const requestInit = script.headers ? { headers: script.headers } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
  try {
    await client.connect(transport);
  } catch (e) {
    emit({ event: 'fatal', error: errorOf(e) });
    return;
  }
  emit({
    event: 'initialized',
    result: {
      protocolVersion: transport.protocolVersion ?? null,
      serverInfo: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
    },
    session: transport.sessionId ?? null,
  });
  try {
    for (const [i, step] of script.steps.entries()) {
      const line = { step: i, op: step.op };
      try {
        emit({ ...line, ok: true, result: await runStep(client, step) });
      } catch (e) {
        emit({ ...line, ok: false, error: errorOf(e) });
      }
    }
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

const argv = process.argv.slice(2);
if (argv.length !== 2) {
  process.stderr.write('usage: ts_client_2025.mjs URL SCRIPT_JSON|@file|-\n');
  process.exitCode = 2;
} else {
  const text = argv[1] === '-' ? readFileSync(0, 'utf8') : argv[1].startsWith('@') ? readFileSync(argv[1].slice(1), 'utf8') : argv[1];
  try {
    await run(argv[0], JSON.parse(text));
  } catch (e) {
    emit({ event: 'fatal', error: errorOf(e) });
  }
}

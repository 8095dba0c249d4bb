// What a host built on the official TypeScript SDK sees of `ksearch serve`: the tool schemas, the loop on
// the built-in softmax task, the protocol's error answers, and cancellation. stdio.mjs and http.mjs run these
// checks over their transport; tests/mcp/test_ts_client.py runs both.
//
// Environment: KSEARCH_SERVE, a JSON array that starts ksearch (default ["ksearch"]; the scripts append
// `serve ...`); KSEARCH_TS_TMP, a folder for the databases (default: a new temporary folder);
// KSEARCH_TS_VERBOSE=1 prints each tool call's seconds on stderr; KSEARCH_TS_TASK, the softmax task to search
// (default the built-in `softmax`; the tests give a copy with a smaller smoke workload).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export const TOOLS = [
  'benchmark', 'benchmark_batch', 'compile_kernel', 'create_search', 'edit_tree', 'export_kernel', 'final_evaluation', 'finish_intent', 'get_tree',
  'list_searches', 'list_tasks', 'plug_back', 'profile_model', 'profile_ncu', 'propose_intents', 'query_bank',
  'run_correctness', 'run_search',
  'select_action', 'set_budgets',
];
const CALL = { timeout: 300_000 }; // the first evaluation starts the sandbox workers (torch import)
export const TEXT_BUDGET = 800; // bytes of text a benchmark result may give the model to read

export const serveCommand = () => JSON.parse(process.env.KSEARCH_SERVE ?? '["ksearch"]');
const TASK = process.env.KSEARCH_TS_TASK ?? 'softmax';
export const tmp = () => process.env.KSEARCH_TS_TMP ?? mkdtempSync(join(tmpdir(), 'ksearch-ts-'));

/** The SDK's own structured-output validator, counting what it checks: proof that it ran. */
class CountingValidator {
  constructor() {
    this.inner = new AjvJsonSchemaValidator();
    this.checked = 0;
  }

  getValidator(schema) {
    const validate = this.inner.getValidator(schema);
    return (input) => {
      this.checked += 1;
      return validate(input);
    };
  }
}

/** A connected client with what the checks need: its validator, the tools and their input validators. */
export async function connect(transport, name) {
  const validator = new CountingValidator();
  const client = new Client({ name, version: '1.0.0' }, { jsonSchemaValidator: validator });
  const errors = [];
  client.onerror = (e) => errors.push(e); // e.g. a response to a request the client already cancelled
  await client.connect(transport);
  return { client, validator, errors, name, tools: [], inputs: {} };
}

const seconds = (t0) => (performance.now() - t0) / 1000;
export const texts = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
const bytes = (res) => texts(res).reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
const next = (res) => texts(res).at(-1) ?? '';

/** tools/list: every tool there, described and annotated, each input and output schema valid JSON Schema
 * 2020-12 (strict: no unknown keyword), and the SDK holding an output validator for each tool. */
export async function checkTools(k) {
  const { tools } = await k.client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  const ajv = new Ajv2020.default({ strict: true, allErrors: true });
  addFormats.default(ajv);
  for (const t of tools) {
    assert.ok(t.description?.length > 40, `${t.name}: no description a model can use`);
    for (const [which, schema] of [['inputSchema', t.inputSchema], ['outputSchema', t.outputSchema]]) {
      assert.equal(schema?.type, 'object', `${t.name}.${which} is not an object schema`);
      assert.ok(ajv.validateSchema(schema), `${t.name}.${which}: ${ajv.errorsText(ajv.errors)}`);
      const compiled = ajv.compile(schema); // throws on a keyword strict mode does not know
      if (which === 'inputSchema') k.inputs[t.name] = compiled;
    }
    assert.ok(k.client.getToolOutputValidator(t.name), `the SDK compiled no output validator for ${t.name}`);
    assert.ok(t.annotations && typeof t.annotations.readOnlyHint === 'boolean', `${t.name}: no annotations`);
  }
  k.tools = tools;
  return tools.length;
}

/** A tool call that must succeed: its arguments valid against its inputSchema (what a strict host checks
 * before sending), and its structuredContent validated by the SDK against the outputSchema. */
export async function call(k, name, args, options = {}) {
  const validArgs = k.inputs[name];
  assert.ok(validArgs, `checkTools first: ${name}'s inputSchema is not compiled`);
  assert.ok(validArgs(args), `${name} arguments break its inputSchema: ${JSON.stringify(validArgs.errors)}`);
  const before = k.validator.checked;
  const t0 = performance.now();
  const res = await k.client.callTool({ name, arguments: args }, undefined, { ...CALL, ...options });
  if (process.env.KSEARCH_TS_VERBOSE) console.error(`${k.name} ${name}: ${seconds(t0).toFixed(2)} s`);
  assert.ok(!res.isError, `${name} failed: ${texts(res).join('\n')}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent`);
  assert.equal(k.validator.checked, before + 1, `the SDK did not validate ${name}'s structuredContent`);
  return res;
}

/** A tool call that must be refused as a tool error (isError with plain text). */
export async function refused(k, name, args) {
  const res = await k.client.callTool({ name, arguments: args }, undefined, CALL);
  const text = texts(res).join('\n');
  assert.equal(res.isError, true, `${name} accepted ${JSON.stringify(args).slice(0, 200)}`);
  assert.ok(text && !/Traceback|errors\.pydantic\.dev|failed inside ksearch/.test(text), text.slice(0, 800));
  return text;
}

const data = (res) => {
  const s = res.structuredContent;
  return Object.keys(s).length === 1 && 'result' in s ? s.result : s;
};

/** The SDK really checks structuredContent: against a schema the result cannot meet, the call is refused. */
export async function outputValidationBites(k) {
  const strict = k.tools.map((t) => (t.name !== 'list_searches' ? t : {
    ...t,
    outputSchema: { ...t.outputSchema, required: [...(t.outputSchema.required ?? []), 'no_such_field'] },
  }));
  k.client.cacheToolMetadata(strict); // the SDK's cache of output validators, as listTools fills it
  try {
    await assert.rejects(
      k.client.callTool({ name: 'list_searches', arguments: {} }, undefined, CALL),
      (e) => e instanceof McpError && /output schema/.test(e.message),
    );
  } finally {
    k.client.cacheToolMetadata(k.tools);
  }
}

async function rootId(k, search) {
  const tree = data(await call(k, 'get_tree', { search, format: 'json' })).tree;
  return tree.nodes.find((n) => n.kind === 'root').id;
}

async function sourceOf(k, attemptId) {
  const res = await k.client.readResource({ uri: `ksearch://attempts/${attemptId}` });
  return JSON.parse(res.contents[0].text).source;
}

/** The loop on softmax as a host follows it, each step checked against the `next` the previous one gave:
 * create_search, the seed measured on the root, propose_intents, select_action, benchmark with node_id,
 * finish_intent, final_evaluation. Returns the text bytes of the benchmark results. */
export async function softmaxFlow(k, search) {
  const created = await call(k, 'create_search', { task: TASK, name: search, rounds: 1, seed: 7 });
  assert.equal(data(created).name, search);
  assert.match(next(created), /^next: Phase 0 \(init\).*"seed": true/s);
  assert.match(await refused(k, 'select_action', { search }), /seed is not measured yet/);

  const root = await rootId(k, search);
  const seeded = await call(k, 'benchmark', { search, node_id: root, candidate: { seed: true } });
  const seed = data(seeded);
  assert.equal(seed.evaluation.status, 'ok', seed.summary);
  assert.equal(seed.refine, null);
  assert.match(texts(seeded)[0], /^recorded as attempt #\d+, candidate \w+; record: ksearch:\/\/attempts\/\d+\nstatus: ok\n/);
  assert.match(next(seeded), /propose_intents/);
  const sizes = [bytes(seeded)];
  const said = [texts(seeded).join('\n')];

  const proposed = await call(k, 'propose_intents', {
    search,
    intents: [
      { title: 'one row per program, the row kept in registers', rationale: 'one read of the row', priority: 0.9, difficulty: 1, expected_speedup: 1.2 },
      { title: 'online softmax in a single pass', rationale: 'max and sum in one loop', priority: 0.4, difficulty: 3 },
    ],
  });
  const [first] = data(proposed);
  assert.match(next(proposed), /select_action/);

  const sel = data(await call(k, 'select_action', { search }));
  assert.ok(sel.claimed && sel.round === 1, JSON.stringify(sel).slice(0, 400));
  assert.equal(sel.node.id, first.id);
  assert.equal(sel.base_attempt_id, seed.attempt_id);
  assert.match(sel.next, new RegExp(`benchmark it with node_id=${first.id}`));

  // attempt 1: the code it builds on (read as a resource), changed as a model would
  const source = `# one row per program\n${await sourceOf(k, seed.attempt_id)}`;
  const tried = await call(k, 'benchmark', { search, node_id: first.id, candidate: { source } });
  const attempt = data(tried);
  assert.equal(attempt.evaluation.status, 'ok', attempt.summary);
  assert.equal(attempt.base_attempt_id, seed.attempt_id);
  assert.deepEqual([attempt.refine.attempts, attempt.refine.over], [1, false]);
  assert.match(next(tried), /Write another implementation/);
  assert.match(texts(tried)[0], /\ncorrect on /);
  sizes.push(bytes(tried));
  said.push(texts(tried).join('\n'));

  const fin = data(await call(k, 'finish_intent', { search }));
  assert.equal(fin.node.status, 'closed');
  assert.equal(fin.node.best_attempt_id, attempt.attempt_id);
  assert.match(fin.reflect_prompt, /Round 1: reflect on intent/);
  assert.match(fin.next, /final_evaluation/); // a one-round budget is spent
  assert.match(await refused(k, 'select_action', { search }), /budget is spent/);

  const final = data(await call(k, 'final_evaluation', { search }));
  assert.ok(final.rows.some((r) => r.attempt_id === attempt.attempt_id), JSON.stringify(final).slice(0, 600));
  const row = data(await call(k, 'list_searches', {})).find((s) => s.name === search);
  assert.ok(['done', 'stopped'].includes(row.status), row.status);
  assert.equal(row.attempts, 2);

  const prompt = await k.client.getPrompt({ name: 'implement_intent', arguments: { search, node_id: String(first.id) } });
  assert.match(prompt.messages[0].content.text, /ModelNew/);
  const tree = await k.client.readResource({ uri: `ksearch://searches/${search}/tree` });
  assert.match(tree.contents[0].text, /online softmax in a single pass/);
  sizes.forEach((n, i) => assert.ok(n < TEXT_BUDGET, `a benchmark result gave ${n} bytes of text:\n${said[i]}`));
  return sizes;
}

async function invalidParams(promise, needle) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof McpError, `not a JSON-RPC error: ${e}`);
    assert.equal(e.code, ErrorCode.InvalidParams, e.message);
    assert.ok(e.message.includes(needle), `${e.message} does not say ${needle}`);
    return true;
  });
}

/** Protocol errors are JSON-RPC invalid-params with what is accepted; tool-argument errors are tool results
 * with isError and plain text; a huge value is never echoed back whole. */
export async function protocolCases(k) {
  await invalidParams(k.client.getPrompt({ name: 'nope', arguments: {} }), 'analyse_kernel');
  await invalidParams(k.client.getPrompt({ name: 'analyse_kernel', arguments: {} }), 'needs the argument(s) search');
  await invalidParams(k.client.readResource({ uri: 'ksearch://tasks/nope' }), "unknown task 'nope'");
  await invalidParams(k.client.readResource({ uri: 'ksearch://searches/nope/tree' }), "no search named 'nope'");
  await invalidParams(k.client.readResource({ uri: 'ksearch://attempts/99999' }), 'no attempt #99999');
  assert.match(await refused(k, 'get_tree', { search: { x: 1 } }), /search/);
  assert.match(await refused(k, 'get_tree', { search: 'nope', colour: 'red' }), /colour/);
  assert.match(await refused(k, 'propose_intents', { search: 'nope', intents: [{ title: 'x', priority: 7 }] }), /priority/);
  assert.match(await refused(k, 'no_such_tool', {}), /Unknown tool: no_such_tool/);
  const huge = await refused(k, 'get_tree', { search: 'x'.repeat(1_000_000) });
  assert.ok(huge.length < 600, `${huge.length} characters echoed for a 1 MB value`);
}

const slowFrom = (seed) => {
  const slow = seed
    .replace('import torch\n', 'import time\nimport torch\n')
    .replace('    def forward(self, x):\n', '    def forward(self, x):\n        time.sleep(60)\n');
  assert.ok(slow.includes('import time\n') && slow.includes('time.sleep(60)'), 'the seed changed shape');
  return slow;
};

async function claimedIntent(k, search) {
  await call(k, 'create_search', { task: TASK, name: search });
  const seeded = data(await call(k, 'benchmark', { search, node_id: await rootId(k, search), candidate: { seed: true } }));
  await call(k, 'propose_intents', { search, intents: [{ title: `an intent of ${search}` }] });
  const node = data(await call(k, 'select_action', { search })).node.id;
  return { node, seed: await sourceOf(k, seeded.attempt_id) };
}

/** A benchmark whose forward sleeps 60 s, aborted through an AbortSignal after `abortAfter` s: the call
 * rejects at once, and a fast run_correctness (on `other`, another client, when given; sent while the
 * sleeper still runs when `overlap`) is answered within 30 s of the abort, correct, not blamed; nothing is
 * recorded. No answer to the cancelled request reaches a client, except, over streamable HTTP
 * (`http: true`), the -32800 the Python SDK's 2025-era HTTP transport sends on purpose to end that request's
 * stream: the SDK client reports it through onerror, and it must be the only thing it reports. */
export async function cancellation(k, search, { other = k, abortAfter = 8, overlap = false, http = false } = {}) {
  const { node, seed } = await claimedIntent(k, search);
  const controller = new AbortController();
  const t0 = performance.now();
  const sleeper = k.client.callTool(
    { name: 'benchmark', arguments: { search, node_id: node, candidate: { source: slowFrom(seed) } } },
    undefined,
    { ...CALL, signal: controller.signal },
  );
  setTimeout(() => controller.abort(new Error('the host cancelled it')), abortAfter * 1000);
  let fast;
  if (overlap) {
    await new Promise((r) => setTimeout(r, (abortAfter / 2) * 1000));
    fast = call(other, 'run_correctness', { search, candidate: { seed: true } });
  }
  await assert.rejects(sleeper, /cancelled it|abort/i);
  const abortedAt = performance.now();
  const aborted = seconds(t0);
  assert.ok(aborted >= abortAfter - 0.5 && aborted < abortAfter + 5, `the sleeper ended after ${aborted} s`);
  fast ??= call(other, 'run_correctness', { search, candidate: { seed: true } });
  const res = data(await fast);
  const waited = seconds(abortedAt);
  assert.equal(res.evaluation.status, 'ok', res.summary); // not blamed for the sleeper
  assert.ok(waited < 30, `the next call was answered ${waited.toFixed(1)} s after the cancellation`);
  const tree = data(await call(other, 'get_tree', { search, format: 'json' })).tree;
  assert.equal(tree.nodes.find((n) => n.id === node).visits, 0, 'the cancelled attempt was recorded');
  await new Promise((r) => setTimeout(r, 1000)); // time for a stray answer to the cancelled request
  const heard = [...new Set([k, other])].flatMap((c) => c.errors.map((e) => `${c.name}: ${e}`));
  const expected = (e) => http && /^host-\w+: .*unknown message ID.*"code":-32800/.test(e);
  assert.deepEqual(heard.filter((e) => !expected(e)), [], 'a client heard about the cancelled request');
  return { aborted_after_s: aborted, next_call_s: waited, answers_to_the_cancelled_request: heard };
}

/** A free TCP port on the loopback. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** `ksearch serve --http` on `port`, ready when it accepts connections; its stderr kept for a failure. With
 * `token`, the server demands it (KSEARCH_TOKEN) on every request; without, it takes none. */
export async function startHttpServer(port, db, { token } = {}) {
  const [cmd, ...args] = serveCommand();
  const { KSEARCH_TOKEN: _, ...env } = process.env;
  const proc = spawn(cmd, [...args, 'serve', '--http', '--port', String(port), '--db', db], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: token ? { ...env, KSEARCH_TOKEN: token } : env,
  });
  const log = [];
  proc.stderr.on('data', (d) => log.push(d));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`ksearch serve --http exited: ${Buffer.concat(log)}`);
    const up = await new Promise((resolve) => {
      const sock = net.connect(port, '127.0.0.1', () => sock.end(() => resolve(true)));
      sock.once('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error(`ksearch serve --http did not listen: ${Buffer.concat(log)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    log: () => Buffer.concat(log).toString(),
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** Run `body`, print its result as one JSON line; on a failure print the error and the server's log. */
export async function main(transport, body, serverLog) {
  const watchdog = setTimeout(() => {
    console.error(`${transport}: still running after 540 s\n${serverLog()}`);
    process.exit(2);
  }, 540_000);
  try {
    const result = await body();
    console.log(JSON.stringify({ transport, ok: true, ...result }));
  } catch (e) {
    console.error(e?.stack ?? e);
    console.error(`--- server log (tail) ---\n${serverLog().slice(-6000)}`);
    process.exitCode = 1;
  } finally {
    clearTimeout(watchdog);
  }
  process.exit(process.exitCode ?? 0); // a transport left open must not keep the process alive
}

// ksearch over streamable HTTP, as hosts on the official TypeScript SDK see it, two of them at once, each
// giving the server's bearer token through the transport's requestInit headers; clients without it or with a
// wrong one are turned away (401): `node http.mjs` (see lib.mjs for the environment it reads).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import {
  call, cancellation, checkTools, connect, freePort, main, protocolCases, softmaxFlow, startHttpServer, tmp,
} from './lib.mjs';

const port = await freePort();
const token = randomBytes(24).toString('base64url');
const server = await startHttpServer(port, join(tmp(), 'http.db'), { token });
const url = new URL(`http://127.0.0.1:${port}/mcp`);
const withAuthorization = (value) => new StreamableHTTPClientTransport(
  url, value === undefined ? {} : { requestInit: { headers: { Authorization: value } } },
);

/** What the SDK's client gets from a server it may not use: the HTTP status of its error. */
async function refusal(value) {
  const transport = withAuthorization(value);
  try {
    await connect(transport, 'stranger');
  } catch (e) {
    return e.code ?? String(e);
  } finally {
    await transport.close();
  }
  return 'connected';
}

await main('http', async () => {
  const strangers = [await refusal(undefined), await refusal(`Bearer ${token}x`)];
  assert.deepEqual(strangers, [401, 401]);
  const [a, b] = await Promise.all(
    ['host-a', 'host-b'].map((name) => connect(withAuthorization(`Bearer ${token}`), name)),
  );
  try {
    assert.ok(a.client.transport.sessionId && a.client.transport.sessionId !== b.client.transport.sessionId);
    await Promise.all([checkTools(a), checkTools(b)]);
    // two hosts at work at once: a's loop and b's protocol cases interleave on one server
    const [benchmarkTextBytes] = await Promise.all([softmaxFlow(a, 'flow-a'), protocolCases(b)]);
    const names = (await call(b, 'list_searches', {})).structuredContent.result.map((s) => s.name);
    assert.ok(names.includes('flow-a'), names.join(', ')); // one database behind both sessions
    // a's cancelled job neither delays nor is blamed on b's call, in flight while a's job ran
    const cancel = await cancellation(a, 'cancel', { other: b, overlap: true, http: true });
    await call(a, 'list_searches', {}); // and a's session goes on after its cancellation
    return {
      validated: a.validator.checked + b.validator.checked, benchmark_text_bytes: benchmarkTextBytes, cancel, strangers,
    };
  } finally {
    await Promise.all([a.client.close(), b.client.close()]);
    await server.stop();
  }
}, server.log);

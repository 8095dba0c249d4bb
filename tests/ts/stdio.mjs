// ksearch over stdio, as a host on the official TypeScript SDK sees it: `node stdio.mjs`
// (see lib.mjs for the environment it reads).
import { join } from 'node:path';

import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import {
  cancellation, checkTools, connect, main, outputValidationBites, protocolCases, serveCommand, softmaxFlow, tmp,
} from './lib.mjs';

const [command, ...args] = serveCommand();
const transport = new StdioClientTransport({
  command,
  args: [...args, 'serve', '--db', join(tmp(), 'stdio.db')],
  env: process.env,
  stderr: 'pipe',
});
const log = [];
transport.stderr.on('data', (d) => log.push(d));

await main('stdio', async () => {
  const k = await connect(transport, 'stdio-host');
  try {
    const t = { start: performance.now() };
    const tools = await checkTools(k);
    await outputValidationBites(k);
    const benchmarkTextBytes = await softmaxFlow(k, 'flow');
    t.flow = performance.now();
    await protocolCases(k);
    t.protocol = performance.now();
    const cancel = await cancellation(k, 'cancel');
    t.cancel = performance.now();
    const took = { flow_s: (t.flow - t.start) / 1e3, protocol_s: (t.protocol - t.flow) / 1e3, cancel_s: (t.cancel - t.protocol) / 1e3 };
    return { tools, validated: k.validator.checked, benchmark_text_bytes: benchmarkTextBytes, cancel, took };
  } finally {
    await k.client.close();
  }
}, () => Buffer.concat(log).toString());

// One agent on the official TypeScript MCP SDK, over streamable HTTP: it adds a memory, waits for a line on
// stdin (the test restarts the server meanwhile), then adds another with the same client and transport.
// Prints one JSON line per step: {"step": ..., "isError": ..., "text": ...}, or {"step": ..., "thrown": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as readline from "node:readline";

const [url, tenant] = process.argv.slice(2);
const client = new Client({ name: "memory-core-restart-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
const transportErrors = [];
transport.onerror = (error) => transportErrors.push(String(error));
await client.connect(transport);

async function add(step) {
  try {
    const result = await client.callTool({
      name: "add_memory",
      arguments: { tenant, session: "ts-session", agent: "ts-agent", content: `typescript sdk ${step}` },
    });
    console.log(JSON.stringify({ step, isError: Boolean(result.isError), text: result.content[0].text }));
  } catch (error) {
    console.log(JSON.stringify({ step, thrown: String(error) }));
  }
}

await add("before restart");
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next(); // the test has restarted the server
await add("after restart");
console.log(JSON.stringify({ step: "done", sessionId: transport.sessionId ?? null, transportErrors }));
await client.close();
process.exit(0);

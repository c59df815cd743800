// The official MCP TypeScript SDK as a client of the handoff bridge over
// streamable HTTP: lists tools, resource templates and prompts, writes and
// reads a handoff, and prints one JSON object with what it saw. Everything
// the SDK logs (console.warn/console.error, e.g. `unknown format "uint"
// ignored in schema`) is collected into `warnings` instead of printed, so
// the calling test can assert there is none.
//
//   node client.mjs URL TOKEN KEY
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, key] = process.argv.slice(2);
if (!url || !token || !key) {
  console.error("usage: node client.mjs URL TOKEN KEY");
  process.exit(2);
}

const warnings = [];
for (const level of ["warn", "error", "log", "info", "debug"]) {
  console[level] = (...args) => warnings.push(`${level}: ${args.join(" ")}`);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "handoff-interop-ts", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const templates = await client.listResourceTemplates();
const prompts = await client.listPrompts();
const written = await client.callTool({
  name: "write_handoff",
  arguments: { handoff_key: key, project: "ts", body: "from the TypeScript SDK" },
});
const read = await client.callTool({ name: "get_handoff", arguments: { handoff_key: key } });
await client.close();

process.stdout.write(
  JSON.stringify({
    tools: tools.tools.map((t) => t.name),
    templates: templates.resourceTemplates.map((t) => t.uriTemplate),
    prompts: prompts.prompts.map((p) => p.name),
    written: written.structuredContent ?? null,
    read: read.structuredContent ?? null,
    warnings,
  }) + "\n",
);

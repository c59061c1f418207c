// A coding agent's side of signoff mcp server, on the TypeScript MCP SDK:
// it starts the server as its mcpServers entry says (argv[2], JSON), or
// reaches it at the entry's url with its headers, lists
// the tools, asks permission for a read and for a command, waits for one
// line on stdin (the test approves the command meanwhile), and asks for the
// command again. Each answer is printed as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createInterface } from "node:readline";

const entry = JSON.parse(process.argv[2]);
const transport = entry.url
  ? new StreamableHTTPClientTransport(new URL(entry.url), { requestInit: { headers: entry.headers } })
  : new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, cwd: entry.cwd, stderr: "inherit" });
const client = new Client({ name: "signoff-e2e", version: "1.0.0" });
await client.connect(transport);

const say = (step, value) => process.stdout.write(JSON.stringify({ step, value }) + "\n");
say("server", { version: client.getServerVersion(), protocol: transport.protocolVersion ?? null });
say("tools", (await client.listTools()).tools.map((t) => t.name));

const ask = async (tool_name, input) => {
  const res = await client.callTool({ name: "permission_prompt", arguments: { tool_name, input } });
  return { isError: res.isError ?? false, answer: JSON.parse(res.content[0].text) };
};
say("read", await ask("Read", { file_path: "README.md" }));
const bash = { command: "make deploy", description: "deploy" };
say("bash", await ask("Bash", bash));

const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
// The same call, its keys in another order: the same canonical input.
say("bash-again", await ask("Bash", { description: "deploy", command: "make deploy" }));
const bad = await client.callTool({ name: "permission_prompt", arguments: { tool_name: "Bash" } });
say("bad", { isError: bad.isError ?? false, text: bad.content[0].text });
await client.close();

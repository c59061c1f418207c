// A coding agent's side of signoff mcp gateway, on the TypeScript MCP SDK:
// it starts the gateway as its mcpServers entry says (argv[2], JSON), lists
// the tools, reads a file of the folder argv[3], writes one (held, with
// progress asked for), waits for one line on stdin (the test approves the
// write meanwhile), and makes the same write again. Each answer is printed
// as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createInterface } from "node:readline";
import { join } from "node:path";

const entry = JSON.parse(process.argv[2]);
const data = process.argv[3];
const transport = new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, cwd: entry.cwd, stderr: "inherit" });
const client = new Client({ name: "signoff-gateway-e2e", version: "1.0.0" });
await client.connect(transport);

const say = (step, value) => process.stdout.write(JSON.stringify({ step, value }) + "\n");
say("tools", (await client.listTools()).tools.map((t) => t.name));

const call = async (name, args, options) => {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  return { isError: res.isError ?? false, text: res.content.map((c) => c.text ?? "").join(""), run: res._meta?.["signoff/run_id"] ?? null };
};
say("read", await call("files.read_text_file", { path: join(data, "hello.txt") }));
const write = { path: join(data, "out.txt"), content: "from the typescript agent" };
say("write", await call("files.write_file", write, { onprogress: () => {} }));

const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
// The same call, its keys in another order: the same canonical arguments.
say("write-again", await call("files.write_file", { content: write.content, path: write.path }));
await client.close();

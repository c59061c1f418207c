// A client of the Tasks extension (io.modelcontextprotocol/tasks, revision
// 2026-07-28) in front of signoff mcp gateway. The TypeScript SDK 1.32.2
// implements the tasks of 2025-11-25 only (params.task, tasks/result), so
// that this speaks the revision's JSON-RPC itself, over the SDK's stdio
// transport: it starts the gateway as its mcpServers entry says (argv[2],
// JSON), makes a write (argv[3] the folder) that answers a task, polls
// tasks/get once, waits for one line on stdin (the test approves the write
// meanwhile), and polls again. Each answer is printed as one JSON line.
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createInterface } from "node:readline";
import { join } from "node:path";

const entry = JSON.parse(process.argv[2]);
const data = process.argv[3];
const transport = new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, cwd: entry.cwd, stderr: "inherit" });
const pending = new Map();
transport.onmessage = (msg) => {
  const p = pending.get(msg.id);
  if (p) {
    pending.delete(msg.id);
    p(msg);
  }
};
await transport.start();

let next = 0;
const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "signoff-tasks-e2e", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
};
const request = (method, params) =>
  new Promise((resolve) => {
    const id = ++next;
    pending.set(id, resolve);
    transport.send({ jsonrpc: "2.0", id, method, params: { ...params, _meta: meta } });
  });
const say = (step, value) => process.stdout.write(JSON.stringify({ step, value }) + "\n");

const write = { path: join(data, "out.txt"), content: "from a tasks client" };
const created = await request("tools/call", { name: "files.write_file", arguments: write });
say("task", created.result ?? created);
const taskId = created.result?.taskId;
say("get", (await request("tasks/get", { taskId })).result);

const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
say("get-after", (await request("tasks/get", { taskId })).result);
await transport.close();

// A coding agent's side of signoff mcp gateway, on the TypeScript MCP SDK,
// driven one step at a time: each line on stdin is one JSON command, and
// each thing the agent sees is one JSON line on stdout, {step, id, value}.
// It starts the gateway as its mcpServers entry says (argv[2], JSON).
//
//   {"do": "connect"}                    start the gateway anew and connect:
//                                        step "connected", value {pid, tools}
//   {"do": "call", "id", "tool", "args"} call a tool, progress asked for,
//                                        without waiting: step "answer", with
//                                        {isError, text, run} or {failed}
//   {"do": "abort", "id"}                cancel that call, as an agent whose
//                                        user pressed stop does
//   {"do": "close"}                      close the transport (the gateway with
//                                        it): step "closed"
//
// A call cut off (aborted, or its gateway gone) answers {failed: message}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createInterface } from "node:readline";

const entry = JSON.parse(process.argv[2]);
const say = (step, id, value) => process.stdout.write(JSON.stringify({ step, id, value }) + "\n");

let client = null;
const aborts = new Map();

const connect = async () => {
  const transport = new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, cwd: entry.cwd, stderr: "inherit" });
  client = new Client({ name: "signoff-gateway-steps", version: "1.0.0" });
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  say("connected", "", { pid: transport.pid, tools });
};

const call = (id, name, args) => {
  const abort = new AbortController();
  aborts.set(id, abort);
  // Held calls hear progress; a held call outlives the SDK's default timeout.
  const options = { signal: abort.signal, onprogress: () => {}, resetTimeoutOnProgress: true, timeout: 120_000 };
  client.callTool({ name, arguments: args }, undefined, options).then(
    (res) => say("answer", id, { isError: res.isError ?? false, text: res.content.map((c) => c.text ?? "").join(""), run: res._meta?.["signoff/run_id"] ?? null }),
    (err) => say("answer", id, { failed: String(err?.message ?? err) }),
  );
};

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  switch (cmd.do) {
    case "connect":
      await connect();
      break;
    case "call":
      call(cmd.id, cmd.tool, cmd.args);
      break;
    case "abort":
      aborts.get(cmd.id)?.abort("the agent stopped the call");
      break;
    case "close":
      await client.close();
      say("closed", "", null);
      break;
    default:
      throw new Error(`unknown command ${line}`);
  }
}
await client?.close();

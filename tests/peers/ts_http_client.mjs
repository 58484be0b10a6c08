// The TypeScript SDK's own Streamable HTTP client (npm @agentclientprotocol/sdk,
// `createHttpStream`) against URL: one connection makes a session and prompts it, a second
// one loads that session (the SDK opens the session's SSE stream before it POSTs
// session/load). Prints what it saw as JSON. Usage: node ts_http_client.mjs URL [SESSION]
// (with SESSION: only the load, of that session id).
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

const [url, given] = process.argv.slice(2);
const seen = { updates: [], load: [], errors: [] };

function app(sink) {
  return client({ name: "ts-http-client" })
    .onNotification(methods.client.session.update, (ctx) => {
      sink.push(ctx.params.update.sessionUpdate);
    })
    .onRequest(methods.client.session.requestPermission, (ctx) => ({
      outcome: { outcome: "selected", optionId: ctx.params.options[0].optionId },
    }));
}

const init = { protocolVersion: 1, clientCapabilities: {} };
let sessionId = given;
if (sessionId === undefined) {
  const stream = createHttpStream(url);
  const turn = await app(seen.updates).connectWith(stream, async (ctx) => {
    await ctx.request(methods.agent.initialize, init);
    const made = await ctx.request(methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
    sessionId = made.sessionId;
    const prompt = [{ type: "text", text: "hello" }];
    return ctx.request(methods.agent.session.prompt, { sessionId, prompt });
  });
  seen.stopReason = turn.stopReason;
}
try {
  const stream = createHttpStream(url);
  const loaded = await app(seen.load).connectWith(stream, async (ctx) => {
    const answer = await ctx.request(methods.agent.initialize, init);
    seen.loadSession = Boolean(answer.agentCapabilities?.loadSession);
    return ctx.request(methods.agent.session.load, { sessionId, cwd: "/tmp", mcpServers: [] });
  });
  seen.loaded = loaded !== undefined;
} catch (error) {
  seen.errors.push(String(error?.message ?? error));
}
seen.sessionId = sessionId;
process.stdout.write(JSON.stringify(seen) + "\n");
process.exit(0);

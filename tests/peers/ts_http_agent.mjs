// The TypeScript SDK's own ACP server (`AcpServer`, npm @agentclientprotocol/sdk) on
// 127.0.0.1, a free port, printed as "listening on http://...": an agent that makes sessions
// (kept for the whole process, so a second connection can session/load one), answers a
// prompt with one update, and on session/load replays that update or refuses an unknown id.
import http from "node:http";
import { agent, methods, RequestError } from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler } from "@agentclientprotocol/sdk/experimental/node";

const sessions = new Set();
const say = (sessionId, text) => ({
  sessionId,
  update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
});

const app = agent({ name: "ts-http-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: 1,
    agentCapabilities: { loadSession: true },
    authMethods: [],
  }))
  .onRequest(methods.agent.session.new, () => {
    const sessionId = `ts-${sessions.size + 1}`;
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, async (ctx) => {
    await ctx.client.notify(methods.client.session.update, say(ctx.params.sessionId, "hi"));
    return { stopReason: "end_turn" };
  })
  .onRequest(methods.agent.session.load, async (ctx) => {
    if (!sessions.has(ctx.params.sessionId)) {
      throw new RequestError(-32002, `unknown session ${ctx.params.sessionId}`);
    }
    await ctx.client.notify(methods.client.session.update, say(ctx.params.sessionId, "hi"));
    return {};
  });

const server = http.createServer(createNodeHttpHandler(new AcpServer({ agent: app })));
server.listen(0, "127.0.0.1", () => {
  process.stderr.write(`listening on http://127.0.0.1:${server.address().port}/acp\n`);
});

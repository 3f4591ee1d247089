import assert from "node:assert/strict";
import { test } from "node:test";
import type { ModelMessage } from "ai";
import { fromChat, fromStored, toStored } from "../src/ai.js";
import type { Message } from "../src/index.js";

// As the server gives them back: through JSON.
const asStored = (chats: object[]): Message[] => JSON.parse(JSON.stringify(chats.map((c, i) => ({ ...c, seq: i + 1 }))));

test("AI SDK messages -> stored chat messages -> the same AI SDK messages", () => {
  const messages: ModelMessage[] = [
    { role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image", image: new Uint8Array([1, 2, 3]), mediaType: "image/png" }] },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "look at it" },
        { type: "tool-call", toolCallId: "c1", toolName: "inspect", input: { depth: 2 } },
        { type: "tool-call", toolCallId: "c2", toolName: "lookup", input: { q: "png" } },
      ],
    },
    {
      role: "tool",
      content: [
        { type: "tool-result", toolCallId: "c1", toolName: "inspect", output: { type: "json", value: { bytes: 3 } } },
        { type: "tool-result", toolCallId: "c2", toolName: "lookup", output: { type: "text", value: "an image" } },
      ],
    },
    { role: "assistant", content: "A tiny PNG." },
  ];
  const stored = toStored(messages);
  // What a chat model reads: one assistant message with both calls, one tool message per result.
  assert.deepEqual(stored.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.match(JSON.stringify(stored[0]!.content), /data:image\/png;base64,AQID/);
  assert.deepEqual((stored[1] as { tool_calls: { id: string }[] }).tool_calls.map((c) => c.id), ["c1", "c2"]);
  assert.equal(stored[2]!.content, '{"bytes":3}');
  assert.equal(stored[4]!.metadata, undefined, "a plain text answer needs no copy");
  const back = fromStored(asStored(stored));
  const image = { type: "image", image: "AQID", mediaType: "image/png" }; // the bytes as base64, which the SDK takes
  assert.deepEqual(back, [{ role: "user", content: [messages[0]!.content[0], image] }, ...messages.slice(1)]);
});

test("a payload's tool results are named after their calls", () => {
  const back = fromChat([
    { role: "system", content: "sys" },
    { role: "assistant", content: null, tool_calls: [{ id: "c9", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } }] },
    { role: "tool", tool_call_id: "c9", content: "preview: 1,000 lines ... GET /sessions/x/messages/3" },
  ]);
  assert.deepEqual(back[2], {
    role: "tool",
    content: [{ type: "tool-result", toolCallId: "c9", toolName: "read_file", output: { type: "text", value: "preview: 1,000 lines ... GET /sessions/x/messages/3" } }],
  });
  assert.deepEqual(back[1], { role: "assistant", content: [{ type: "tool-call", toolCallId: "c9", toolName: "read_file", input: { path: "a" } }] });
});

test("a text tool result is stored once: read back named after its call, parallel results as one message", () => {
  const names = new Map<string, string>();
  const calls: ModelMessage = {
    role: "assistant",
    content: [
      { type: "tool-call", toolCallId: "c1", toolName: "read_file", input: { path: "a" } },
      { type: "tool-call", toolCallId: "c2", toolName: "grep", input: { q: "b" } },
    ],
  };
  const results: ModelMessage = {
    role: "tool",
    content: [
      { type: "tool-result", toolCallId: "c1", toolName: "read_file", output: { type: "text", value: "A".repeat(1000) } },
      { type: "tool-result", toolCallId: "c2", toolName: "grep", output: { type: "text", value: "B" } },
    ],
  };
  // The calls in one batch, their results in the next (the memory keeps the names between).
  const stored = [...toStored([calls], names), ...toStored([results], names)];
  assert.deepEqual(stored.map((m) => m.role), ["assistant", "tool", "tool"]);
  assert.deepEqual(stored.slice(1).map((m) => m.metadata), [undefined, { ai_sdk_more: true }], "no copy of an output");
  assert.deepEqual(fromStored(asStored(stored)), [calls, results]);

  // A result whose call this batch and the calls before it do not name keeps its copy.
  const orphan = toStored([{ role: "tool", content: [results.content[1]!] }]);
  assert.deepEqual(orphan[0]!.metadata, { ai_sdk: { role: "tool", content: [results.content[1]] } });
  // Two tool messages in a row stay two.
  const two: ModelMessage[] = [calls, { role: "tool", content: [results.content[0]!] }, { role: "tool", content: [results.content[1]!] }];
  assert.deepEqual(fromStored(asStored(toStored(two))), two);
});

/**
 * contextd-client: a typed TypeScript client for contextd, the context service for LLM
 * agents. Adapters, each behind an optional peer dependency: `contextd-client/ai`
 * (Vercel AI SDK), `contextd-client/agents` (OpenAI Agents SDK), `contextd-client/langchain`
 * (chat history, LangGraph hooks) and `contextd-client/langchain-agent` (LangChain v1 middleware).
 */
export { ContextdClient, DEFAULT_URL, newMessageId, withIds } from "./client.js";
export type { ClientOptions, Identified } from "./client.js";
export * from "./errors.js";
export { PrefixMemory } from "./prefix.js";
export {
  MAX_READ_CHARS,
  NO_ARGUMENTS,
  RANGE_MAX_CHARS,
  RANGE_MAX_MESSAGES,
  RECALL_DESCRIPTION,
  RECALL_PARAMETERS,
  RECALL_PROPERTIES,
  RECALL_TOOL_NAME,
  SEARCH_LIMIT,
  formatMessage,
  formatRange,
  formatSearch,
  pyRepr,
  recallTool,
  runRecall,
} from "./recall.js";
export type { RecallArguments } from "./recall.js";
export type { HeldLease } from "./lease.js";
export type { PreviousPrefix } from "./prefix.js";
export { Retry } from "./retry.js";
export type { RetryOptions } from "./retry.js";
export type * from "./types.js";

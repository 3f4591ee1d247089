/** Names for the generated schema types (src/generated/openapi.ts), as the client uses them. */
import type { components, paths } from "./generated/openapi.js";

export type { components, paths };
type S = components["schemas"];

export type SystemMessage = S["SystemMessage"];
export type UserMessage = S["UserMessage"];
export type AssistantMessage = S["AssistantMessage"];
export type ToolMessage = S["ToolMessage"];
/** A message to append: an OpenAI chat message with contextd's optional flags. */
export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

export type SessionSettings = Omit<S["SessionSettingsIn"], "lock_token">;
export type Session = S["Session"];
/** A session's counts and its token calibration (`token_calibration`). */
export type SessionStats = S["SessionStats"];
export type SessionPage = S["SessionPage"];
/** The append's answer; `created` is false when every message was a replay of a stored id. */
export type AppendResult = S["AppendOut"] & { created: boolean };
export type Message = S["StoredMessage"];
export type MessageOut = S["MessageOut"];
export type MessagePage = S["MessagePage"];
export type TailDeleteResult = S["DeletedTail"];
export type ClearResult = S["Cleared"];
export type Context = S["ContextPayload"];
/** What the assembly did with one message (`seq`): `action` kept, previewed, cut, dropped or excluded; `rule` says why. */
export type Decision = S["Decision"];
export type ContextUsage = S["ContextUsage"];
export type ContextOptions = Omit<S["ContextIn"], "previous_prefix_id">;
export type Budget = S["Budget"];
export type BudgetPreview = S["BudgetPreview"];
export type CompactOptions = Omit<NonNullable<S["CompactIn"]>, "lock_token">;
export type CompactResult = S["CompactionJob"] | S["CompactionDryRun"];
export type CompactionState = S["CompactionState"];
export type RevertResult = S["CompactionRevert"];
export type EventPage = S["EventPage"];
export type SearchResult = S["SearchOut"];
export type SearchQuery = { q: string; limit?: number; before_seq?: number; roles?: string[] };
export type Lease = S["Lease"];
export type TokenCountInput = S["CountIn"];
export type TokenCount = S["TokenCount"];
export type UsageInput = Omit<S["UsageIn"], "lock_token">;
export type UsageReport = S["UsageReport"];
export type Format = NonNullable<S["ContextIn"]["format"]>;

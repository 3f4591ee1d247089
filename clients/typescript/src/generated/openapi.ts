/**
 * contextd's HTTP API as TypeScript types, generated from the server's /openapi.json
 * by openapi-typescript. Do not edit: run `npm run generate` after an API change.
 */

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the process answers */
        get: operations["healthz_healthz_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics */
        get: operations["metrics_metrics_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: database reachable and schema at the latest migration */
        get: operations["readyz_readyz_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List sessions, cursor-paginated by id */
        get: operations["list_sessions_sessions_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Settings plus stats, lease and budget */
        get: operations["get_session_sessions__session_id__get"];
        /**
         * Create or update a session
         * @description 201 when it created the session, 200 when it updated it. Omitted fields keep their value.
         */
        put: operations["put_session_sessions__session_id__put"];
        post?: never;
        /** Delete a session and its log */
        delete: operations["delete_session_sessions__session_id__delete"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/budget": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Budget status (SPEC §4) */
        get: operations["get_budget_sessions__session_id__budget_get"];
        put?: never;
        /** The budget after appending these messages, without writing anything */
        post: operations["preview_budget_sessions__session_id__budget_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/clear": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Empty the log, summary and watermark; keep the settings
         * @description Deletes every message, the rolling summary, the memory-flush candidates and
         *     the watermark in one transaction; settings (model, system prompt, tools,
         *     anchors, compaction overrides, metadata), the lease and the event log stay.
         *     The next append gets seq 1. Fenced like an append (`lock_token` in the body).
         *     A compaction running meanwhile stores nothing. A `session.cleared` event
         *     records it.
         */
        post: operations["clear_session_sessions__session_id__clear_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/compact": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Request a compaction
         * @description 202 `{job_id, status}`; concurrent requests for one session share one job.
         *     With `wait`, 200 with the finished job `{job_id, status, compaction_metadata}`
         *     (202 if it is still running when the wait ends).
         */
        post: operations["compact_sessions__session_id__compact_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/compaction": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Compaction state
         * @description Summary text and structure, watermark, metadata, memory-flush candidates, recent jobs.
         */
        get: operations["compaction_state_sessions__session_id__compaction_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/compaction/{job_id}/revert": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Undo the latest stored compaction
         * @description Puts back the summary and watermark the job's store replaced, in one update of the
         *     session fenced like an append (`lock_token` while a lease is live); the log is
         *     untouched. Only the session's latest stored compaction can be reverted; after a
         *     revert the one before it is the latest, so reverts walk back one compaction at a
         *     time. Jobs pending or running on the replaced state are ended as `failed` (they
         *     would redo what was undone, or store on a basis that is gone), payloads are
         *     selected afresh (as after a compaction), and automatic compaction leaves the
         *     session alone until its log has grown past the restored state by the regrowth
         *     rule (`regrowth_ratio` of its effective history, at least `min_free_ratio` of the
         *     usable budget); a `POST /compact` is not held back. A `compaction.reverted` event
         *     records it.
         */
        post: operations["revert_compaction_sessions__session_id__compaction__job_id__revert_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/context": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The assembled payload
         * @description From the session's stored system prompt and tools. `messages` goes straight to
         *     `chat.completions.create(messages=...)`; `decisions` say why each seq is kept,
         *     previewed, cut, dropped or excluded. `format` picks the provider's shape.
         */
        get: operations["get_context_sessions__session_id__context_get"];
        put?: never;
        /**
         * The assembled payload, with per-call parts
         * @description Per-call `system` (string or system messages) and `tools` replace the session's;
         *     `dynamic_context` (strings or messages: task goal, retrieved knowledge) comes after
         *     the system block and before the summary and history.
         */
        post: operations["post_context_sessions__session_id__context_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The session's event log */
        get: operations["list_events_sessions__session_id__events_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/lock": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Claim the writer lease
         * @description 409 `lock_held` naming the holder while another live lease exists.
         */
        post: operations["claim_sessions__session_id__lock_post"];
        /** Release the lease */
        delete: operations["release_sessions__session_id__lock_delete"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/lock/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Extend the lease */
        post: operations["renew_sessions__session_id__lock_renew_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/messages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The raw log, paginated by seq; a range or a summary's citation read back
         * @description Compacted messages are included: compaction never deletes the log.
         *
         *     `after_seq < seq < before_seq`, `limit` at a time. In `asc` order (the
         *     default) page on with `after_seq=next_after_seq`; in `desc` order the
         *     messages come newest first and the next (older) page is
         *     `before_seq=next_before_seq`. The last `n` messages of a session are
         *     `?order=desc&limit=n`, one request however long the log.
         *
         *     A range reads back what a summary item cites (`[#412-431]`, SPEC §5): `from_seq`
         *     and `to_seq` (inclusive), or `seqs` as the summary writes it (`412-431`,
         *     `3,7-9`; brackets and `#` may stay). With `seqs`, `next_seqs` is what of them
         *     the page did not reach (`seqs=next_seqs` reads on). `max_chars` holds the
         *     page's text (`content`) to that many characters: short messages come whole, long
         *     ones are cut to an equal share, their `range` naming the characters kept
         *     (`GET …/messages/{seq}` reads one whole). A malformed `seqs`, or `to_seq`
         *     below `from_seq`, is a 422 naming it.
         */
        get: operations["list_messages_sessions__session_id__messages_get"];
        put?: never;
        /**
         * Append 1..N messages atomically
         * @description Messages are OpenAI chat messages with optional contextd flags inline
         *     (`id`, `pinned`, `include_in_context`, `mode`, `run_id`, `metadata`, `error`).
         *     Unknown fields are stored verbatim. A message whose `id` was stored before is
         *     not stored again: its original seq is returned.
         */
        post: operations["append_messages_sessions__session_id__messages_post"];
        /**
         * Delete the tail of the log (seq >= from_seq)
         * @description Removes every message with `seq >= from_seq` in one transaction (an agent
         *     undoing its last step: `pop_item`). Later appends reuse the freed seqs.
         *
         *     Fenced like an append: while a lease is live, send its `lock_token` as a query
         *     parameter or in a JSON body (`{"lock_token": ...}`, as `DELETE /sessions/{id}`
         *     takes it). Only the effective history can be cut: a `from_seq` at or below the
         *     compaction watermark is a 409 `below_watermark`. A `from_seq` past the end deletes
         *     nothing. Tool calls whose answer was deleted are open again; call ids and message
         *     ids of deleted messages may be used again. A compaction running meanwhile stores
         *     nothing. The answer carries the deleted messages in log order, the session's new
         *     `last_seq` and its budget; a `messages.deleted` event records the cut.
         */
        delete: operations["delete_messages_sessions__session_id__messages_delete"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/messages/{seq}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * One message in full, or a range of it
         * @description The target of tool-output previews. With `char_start`/`char_end` (0-based,
         *     end exclusive) or `line_start`/`line_end` (1-based, inclusive), `content` is
         *     that slice of the message's text and `range` says where it sits in the whole,
         *     so an agent can read a large output in pieces; a start past the message's end is a
         *     422 naming it and the message's length.
         */
        get: operations["get_message_sessions__session_id__messages__seq__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/search": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Recall: full-text search over the whole log
         * @description Every message of the session is searched: compacted ones, ones a payload left
         *     out, tool outputs, tool-call names and arguments. Words match whole, and a word
         *     in few messages also as a prefix from three characters on; an identifier
         *     (`src/app/models.py`, `snake_case_name`, `getUserName`) whole or, when no
         *     message holds it whole, by a run of its parts (`app/models.py`, `case_name`);
         *     Chinese, Japanese and Korean text by any substring of two or more characters,
         *     a longer run pair by pair (a question naming something finds it). Messages
         *     matching the query's rarest terms rank first, newest first among equals; the
         *     recall tool's own calls and answers, which quote earlier hits, come last. A
         *     query of only punctuation finds nothing; an empty one is a 422. Read a hit in
         *     full at its `path`.
         */
        get: operations["search_sessions__session_id__search_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Report the provider's usage for a payload: calibrates the session's estimate
         * @description For sessions counted by estimate (`tokenizer_mode: "estimate"`: Claude, Gemini, …)
         *     each report updates the session's calibration factor, which then scales its
         *     counts, budget status and the budget payloads are fitted to. Exact-tokenizer
         *     sessions record the report (the error is shown) and keep factor 1. Fenced by
         *     the session's lease like any write. Returns the calibration with the last
         *     report's error before and after. With the provider's cached figure
         *     (`cached_input_tokens`, or Anthropic's `cache_read_input_tokens`) and the
         *     `usage.cached_input_tokens` of the payload that was sent
         *     (`estimated_cached_input_tokens`), the provider's figure replaces the estimate in
         *     the session's bill (`stats.bill`; `bill_replaced` says so).
         */
        post: operations["report_usage_sessions__session_id__usage_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tokens/count": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Count tokens of text, messages and/or tools for a model
         * @description `messages` counts include per-message overhead and the reply priming, as a request would.
         */
        post: operations["count_tokens_tokens_count_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /**
         * AppendIn
         * @example {
         *       "messages": [
         *         {
         *           "content": "Find the bug in app.py",
         *           "id": "m-1",
         *           "role": "user"
         *         },
         *         {
         *           "content": null,
         *           "role": "assistant",
         *           "tool_calls": [
         *             {
         *               "function": {
         *                 "arguments": "{\"path\": \"app.py\"}",
         *                 "name": "read_file"
         *               },
         *               "id": "call_1",
         *               "type": "function"
         *             }
         *           ]
         *         },
         *         {
         *           "content": "def main(): ...",
         *           "role": "tool",
         *           "tool_call_id": "call_1"
         *         }
         *       ]
         *     }
         */
        AppendIn: {
            /**
             * Lock Token
             * @description the live lease's token
             * @default null
             */
            lock_token?: string | null;
            /** Messages */
            messages: (components["schemas"]["SystemMessage"] | components["schemas"]["UserMessage"] | components["schemas"]["AssistantMessage"] | components["schemas"]["ToolMessage"])[];
        };
        /**
         * AppendOut
         * @example {
         *       "budget": {
         *         "compact_threshold": 112435,
         *         "context_limit": 128000,
         *         "current_tokens": 36,
         *         "status": "ok",
         *         "tokenizer_mode": "exact",
         *         "usable_budget": 124928,
         *         "warn_threshold": 99942
         *       },
         *       "messages": [
         *         {
         *           "id": "m-1",
         *           "seq": 1,
         *           "token_count": 6
         *         }
         *       ]
         *     }
         */
        AppendOut: {
            budget: components["schemas"]["Budget"];
            /** Messages */
            messages: components["schemas"]["StoredRef"][];
        } & {
            [key: string]: unknown;
        };
        /** AssistantMessage */
        AssistantMessage: {
            /**
             * Content
             * @default null
             */
            content?: string | {
                [key: string]: unknown;
            }[] | null;
            /** @default null */
            error?: components["schemas"]["ErrorInfo"] | null;
            /**
             * Id
             * @description client-chosen id: a retried append with the same id is stored once
             * @default null
             */
            id?: string | null;
            /**
             * Include In Context
             * @description false: logged, never sent
             * @default null
             */
            include_in_context?: boolean | null;
            /**
             * Metadata
             * @default null
             */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /**
             * Mode
             * @default null
             */
            mode?: ("chat" | "agent" | "run") | null;
            /**
             * Name
             * @default null
             */
            name?: string | null;
            /**
             * Pinned
             * @description always kept in context
             * @default null
             */
            pinned?: boolean | null;
            /**
             * Refusal
             * @default null
             */
            refusal?: string | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            role: "assistant";
            /**
             * Run Id
             * @default null
             */
            run_id?: string | null;
            /**
             * Tool Calls
             * @default null
             */
            tool_calls?: components["schemas"]["ToolCall"][] | null;
        } & {
            [key: string]: unknown;
        };
        /**
         * Budget
         * @description Budget status of SPEC §4.
         * @example {
         *       "compact_threshold": 112435,
         *       "context_limit": 128000,
         *       "current_tokens": 36,
         *       "status": "ok",
         *       "tokenizer_mode": "exact",
         *       "usable_budget": 124928,
         *       "warn_threshold": 99942
         *     }
         */
        Budget: {
            /** Compact Threshold */
            compact_threshold: number;
            /** Context Limit */
            context_limit: number;
            /** Current Tokens */
            current_tokens: number;
            /**
             * Status
             * @description ok, warn or compact_needed
             */
            status: string;
            /**
             * Tokenizer Mode
             * @description exact or estimate
             */
            tokenizer_mode: string;
            /** Usable Budget */
            usable_budget: number;
            /** Warn Threshold */
            warn_threshold: number;
        } & {
            [key: string]: unknown;
        };
        /** BudgetPreview */
        BudgetPreview: {
            /** Added Tokens */
            added_tokens: number;
            /** @description after appending the messages */
            budget: components["schemas"]["Budget"];
            current: components["schemas"]["Budget"];
            /** Fits */
            fits: boolean;
        } & {
            [key: string]: unknown;
        };
        /**
         * BudgetPreviewIn
         * @example {
         *       "messages": [
         *         {
         *           "content": "hi",
         *           "role": "user"
         *         }
         *       ]
         *     }
         */
        BudgetPreviewIn: {
            /** Messages */
            messages: (components["schemas"]["SystemMessage"] | components["schemas"]["UserMessage"] | components["schemas"]["AssistantMessage"] | components["schemas"]["ToolMessage"])[];
        };
        /** ClaimIn */
        ClaimIn: {
            /** Owner */
            owner: string;
            /**
             * Ttl S
             * @default 30
             */
            ttl_s?: number;
        };
        /** Cleared */
        Cleared: {
            budget: components["schemas"]["Budget"];
            /** Deleted Count */
            deleted_count: number;
            /** Last Seq */
            last_seq: number;
        } & {
            [key: string]: unknown;
        };
        /** CompactIn */
        CompactIn: {
            /**
             * Dry Run
             * @description answer what would be compacted; write nothing
             * @default false
             */
            dry_run?: boolean;
            /**
             * Force
             * @description skip the no-thrash guards (too little to free, not regrown); the preserved tail stays: lower the session's min_preserved_turns to fold more
             * @default false
             */
            force?: boolean;
            /** Lock Token */
            lock_token?: string | null;
            /**
             * Timeout S
             * @description how long `wait` waits
             */
            timeout_s?: number | null;
            /**
             * Wait
             * @default false
             */
            wait?: boolean;
        };
        /** CompactionDryRun */
        CompactionDryRun: {
            /**
             * Dry Run
             * @constant
             */
            dry_run: true;
            /** Reason */
            reason?: string | null;
            /** Would */
            would: string;
            /** Would Compact */
            would_compact: boolean;
        } & {
            [key: string]: unknown;
        };
        /** CompactionJob */
        CompactionJob: {
            /** Attempts */
            attempts?: number | null;
            /** Compaction Metadata */
            compaction_metadata?: {
                [key: string]: unknown;
            } | null;
            /** Created At */
            created_at?: string | null;
            /** Finished At */
            finished_at?: string | null;
            /** Force */
            force?: boolean | null;
            /**
             * Gate
             * @description the quality gate (SPEC §5): scores, dropped, caught (guide.md)
             */
            gate?: {
                [key: string]: unknown;
            } | null;
            /** Job Id */
            job_id: string;
            /** Reason */
            reason?: string | null;
            /**
             * Reverted At
             * @description when a revert undid this compaction (null: never)
             */
            reverted_at?: string | null;
            /** Started At */
            started_at?: string | null;
            /**
             * Status
             * @description pending, running, success, degraded, noop, failed, ...
             */
            status: string;
            /** Trigger */
            trigger?: string | null;
            /** Watermark After */
            watermark_after?: number | null;
            /** Watermark Before */
            watermark_before?: number | null;
        } & {
            [key: string]: unknown;
        };
        /**
         * CompactionRevert
         * @description What `POST /sessions/{id}/compaction/{job_id}/revert` put back.
         */
        CompactionRevert: {
            /**
             * Cancelled Jobs
             * @description jobs that were pending or running on the replaced state, ended as failed
             */
            cancelled_jobs: string[];
            /**
             * Compaction Count
             * @description compactions the restored summary stands for
             */
            compaction_count: number;
            /**
             * Job Id
             * @description the compaction reverted
             */
            job_id: string;
            /**
             * Last Compaction Seq
             * @description the session's watermark now (as restored)
             */
            last_compaction_seq: number;
            /**
             * Reverted
             * @constant
             */
            reverted: true;
            /**
             * Reverted At
             * Format: date-time
             */
            reverted_at: string;
            /**
             * Summary Restored
             * @description a previous summary came back (false: the session has none again)
             */
            summary_restored: boolean;
            /**
             * Watermark Restored
             * @description the watermark the session has again
             */
            watermark_restored: number;
            /**
             * Watermark Reverted
             * @description the watermark the compaction had set
             */
            watermark_reverted: number;
        } & {
            [key: string]: unknown;
        };
        /** CompactionState */
        CompactionState: {
            /** Compacted Context */
            compacted_context?: unknown;
            /** Compaction Count */
            compaction_count: number;
            /** Compaction Metadata */
            compaction_metadata: {
                [key: string]: unknown;
            } | null;
            /** Jobs */
            jobs: components["schemas"]["CompactionJob"][];
            /** Last Compaction Seq */
            last_compaction_seq: number;
            /** Memory Flush Candidates */
            memory_flush_candidates: {
                [key: string]: unknown;
            }[];
            /**
             * Revertable Job Id
             * @description the job a revert would undo now: the latest stored compaction
             */
            revertable_job_id?: string | null;
            summary: components["schemas"]["CompactionSummary"];
        } & {
            [key: string]: unknown;
        };
        /** CompactionSummary */
        CompactionSummary: {
            /** Structure */
            structure: {
                [key: string]: unknown;
            } | null;
            /** Text */
            text: string | null;
            /** Through Seq */
            through_seq: number | null;
            /** Tokens */
            tokens: number;
        } & {
            [key: string]: unknown;
        };
        /**
         * ContextIn
         * @example {
         *       "dynamic_context": [
         *         "Task: make the failing test in tests/test_app.py pass."
         *       ],
         *       "max_tokens": 16000,
         *       "mode": "agent",
         *       "reserve_output_tokens": 1024,
         *       "strategy": "key_messages",
         *       "system": "You are a careful coding agent."
         *     }
         */
        ContextIn: {
            /**
             * Dynamic Context
             * @description after the system block, before the summary and history
             * @default null
             */
            dynamic_context?: (string | (components["schemas"]["SystemMessage"] | components["schemas"]["UserMessage"] | components["schemas"]["AssistantMessage"]))[] | null;
            /**
             * Format
             * @default openai
             * @enum {string}
             */
            format?: "openai" | "responses" | "anthropic";
            /**
             * Max Tokens
             * @default null
             */
            max_tokens?: number | null;
            /**
             * Mode
             * @default null
             */
            mode?: ("chat" | "agent" | "run") | null;
            /**
             * Preview Limit Tokens
             * @default null
             */
            preview_limit_tokens?: number | null;
            /**
             * Previous Prefix Id
             * @description the `prefix_id` of this stream's previous payload (exact prefix stability)
             * @default null
             */
            previous_prefix_id?: string | null;
            /**
             * Recall
             * @description the recall tool and the note on what was left out (default: session)
             * @default null
             */
            recall?: boolean | null;
            /**
             * Reserve Output Tokens
             * @default null
             */
            reserve_output_tokens?: number | null;
            /**
             * Strategy
             * @default null
             */
            strategy?: string | null;
            /**
             * System
             * @description replaces the session's system prompt for this call
             * @default null
             */
            system?: string | components["schemas"]["SystemMessage"][] | null;
            /**
             * Tools
             * @description replaces the session's tools
             * @default null
             */
            tools?: {
                [key: string]: unknown;
            }[] | null;
        };
        /**
         * ContextPayload
         * @description The budget-fitted payload. `format` decides the provider part: `openai` has
         *     `messages` (+ `tools`), `responses` has `input` items, `anthropic` has `system`
         *     blocks and Messages-API `messages`.
         */
        ContextPayload: {
            /** Decisions */
            decisions: components["schemas"]["Decision"][];
            /** Dropped Count */
            dropped_count: number;
            /**
             * Format
             * @enum {string}
             */
            format: "openai" | "responses" | "anthropic";
            /** Input */
            input?: {
                [key: string]: unknown;
            }[] | null;
            /** Kept Seqs */
            kept_seqs: number[];
            /** Messages */
            messages?: {
                [key: string]: unknown;
            }[] | null;
            /** Over Budget */
            over_budget: boolean;
            /**
             * Prefix Id
             * @description send back as previous_prefix_id
             */
            prefix_id?: string | null;
            /** @description with recall on: what the payload leaves out, which the note names */
            recall?: components["schemas"]["LeftOut"] | null;
            /** Strategy */
            strategy: string;
            /** Summary */
            summary: {
                [key: string]: unknown;
            };
            /** System */
            system?: {
                [key: string]: unknown;
            }[] | string | null;
            /** Tools */
            tools?: {
                [key: string]: unknown;
            }[] | null;
            usage: components["schemas"]["ContextUsage"];
            /** Warnings */
            warnings: unknown[];
        } & {
            [key: string]: unknown;
        };
        /** ContextUsage */
        ContextUsage: {
            /** Breakdown */
            breakdown: {
                [key: string]: number;
            };
            /** Budget */
            budget: number;
            /**
             * Cache Provider
             * @description whose rules: anthropic for format=anthropic or a claude* model, else openai
             * @default openai
             * @enum {string}
             */
            cache_provider?: "openai" | "anthropic";
            /**
             * Cached Input Tokens
             * @description of input_tokens, what the provider bills at its cached rate: stable_prefix_tokens under its caching rules (OpenAI: none below 1,024 tokens, then whole 128-token steps; Anthropic: the prefix up to the stable prefix's cache breakpoint, if the stream's previous call was at most five minutes ago and it reaches the model's minimum of 1,024 tokens, 2,048 for Haiku)
             * @default 0
             */
            cached_input_tokens?: number;
            /**
             * Calibration Factor
             * @description the factor the counts were scaled by (1 for exact tokenizers)
             */
            calibration_factor: number;
            /**
             * Full History Input Tokens
             * @description what sending the whole history would have cost: the same system block, tools and dynamic context, and every in-context message of the log, compacted ones included
             * @default 0
             */
            full_history_input_tokens?: number;
            /** Input Tokens */
            input_tokens: number;
            /**
             * Re Reads
             * @description the session's re-reads so far: tool calls so far whose name and arguments repeat an earlier call whose result the payload no longer held whole: at or below the watermark (folded into the summary), left out or masked by the stream's last trim (its stored layout, when it still holds for the session's watermark), or over the tool-output preview limit; counted by the append that makes the call, once (a replayed append counts nothing)
             * @default 0
             */
            re_reads?: number;
            /**
             * Recent Tokens
             * @description tokens of the newest contiguous run of the history the payload holds (what the agent just did; a trim keeps it before any older prefix)
             * @default 0
             */
            recent_tokens?: number;
            /** Stable Prefix Messages */
            stable_prefix_messages?: number | null;
            /**
             * Stable Prefix Tokens
             * @description tokens at the start identical to the previous payload (cacheable)
             */
            stable_prefix_tokens?: number | null;
            /** Status */
            status: string;
            /**
             * Summariser Input Tokens
             * @description the summariser's input tokens of compactions stored since the session's previous payload call
             * @default 0
             */
            summariser_input_tokens?: number;
            /**
             * Summariser Output Tokens
             * @description the summariser's output tokens, likewise
             * @default 0
             */
            summariser_output_tokens?: number;
            /** Tokenizer Mode */
            tokenizer_mode: string;
            /**
             * Uncalibrated Input Tokens
             * @description input_tokens before the session's calibration: report it back with the provider's count (POST /sessions/{id}/usage)
             */
            uncalibrated_input_tokens: number;
        } & {
            [key: string]: unknown;
        };
        /** CountIn */
        CountIn: {
            /** Messages */
            messages?: unknown[] | null;
            /** Model */
            model?: string | null;
            /** Text */
            text?: string | null;
            /** Tools */
            tools?: {
                [key: string]: unknown;
            }[] | null;
        };
        /** Decision */
        Decision: {
            /**
             * Action
             * @description kept, previewed, cut, dropped or excluded
             */
            action: string;
            /** Rule */
            rule?: string | null;
            /** Seq */
            seq: number;
        } & {
            [key: string]: unknown;
        };
        /** DeletedTail */
        DeletedTail: {
            budget: components["schemas"]["Budget"];
            /** Deleted Count */
            deleted_count: number;
            /** Last Seq */
            last_seq: number;
            /**
             * Messages
             * @description the deleted messages, in log order
             */
            messages: components["schemas"]["StoredMessage"][];
        } & {
            [key: string]: unknown;
        };
        /**
         * ErrorInfo
         * @description A failed model call (assistant) or tool call (tool).
         */
        ErrorInfo: {
            /** Message */
            message: string;
            /** Type */
            type: string;
        } & {
            [key: string]: unknown;
        };
        /** Event */
        Event: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Data */
            data: {
                [key: string]: unknown;
            } | null;
            /** Id */
            id: number;
            /** Type */
            type: string;
        } & {
            [key: string]: unknown;
        };
        /** EventPage */
        EventPage: {
            /** Events */
            events: components["schemas"]["Event"][];
            /** Next After Id */
            next_after_id: number | null;
        } & {
            [key: string]: unknown;
        };
        /** FunctionCall */
        FunctionCall: {
            /**
             * Arguments
             * @description the arguments as a JSON string, as the model wrote them
             */
            arguments: string;
            /** Name */
            name: string;
        } & {
            [key: string]: unknown;
        };
        /**
         * Lease
         * @example {
         *       "expires_at": "2026-11-23T11:47:53.726686+00:00",
         *       "fencing_token": 1,
         *       "lock_token": "zLYVLNERreCRrwXAy3nE6edL-epxC4Q4",
         *       "owner": "agent-1"
         *     }
         */
        Lease: {
            /**
             * Expires At
             * Format: date-time
             */
            expires_at: string;
            /** Fencing Token */
            fencing_token: number;
            /** Lock Token */
            lock_token: string;
            /** Owner */
            owner: string;
        } & {
            [key: string]: unknown;
        };
        /** LeftOut */
        LeftOut: {
            /**
             * Left Out
             * @description their seqs, as [first, last] ranges
             */
            left_out: number[][];
            /**
             * Left Out Count
             * @description messages of the history the payload leaves out
             */
            left_out_count: number;
        } & {
            [key: string]: unknown;
        };
        /**
         * LockTokenIn
         * @description The body of a write that takes nothing but the lease's token.
         */
        LockTokenIn: {
            /** Lock Token */
            lock_token?: string | null;
        };
        /** MessageOut */
        MessageOut: {
            /** Content */
            content?: unknown;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            error?: components["schemas"]["ErrorInfo"] | null;
            /** Id */
            id: string;
            /** Include In Context */
            include_in_context: boolean;
            /** Metadata */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /** Mode */
            mode?: ("chat" | "agent" | "run") | null;
            /** Pinned */
            pinned: boolean;
            /** @description where `content` sits in the message's text, when it is a part of it (a char or line range asked, or a cut to a read's `max_chars`) */
            range?: components["schemas"]["TextRange"] | null;
            /**
             * Role
             * @enum {string}
             */
            role: "system" | "user" | "assistant" | "tool";
            /** Run Id */
            run_id?: string | null;
            /** Seq */
            seq: number;
            /** Token Count */
            token_count: number;
        } & {
            [key: string]: unknown;
        };
        /** MessagePage */
        MessagePage: {
            /** Last Seq */
            last_seq: number;
            /** Messages */
            messages: components["schemas"]["MessageOut"][];
            /** Next After Seq */
            next_after_seq: number | null;
            /** Next Before Seq */
            next_before_seq: number | null;
            /**
             * Next Seqs
             * @description with `seqs`: what of them this page did not reach, to read on with
             */
            next_seqs?: string | null;
        } & {
            [key: string]: unknown;
        };
        /**
         * Problem
         * @description RFC 9457 problem details with contextd's stable `code`.
         * @example {
         *       "code": "validation_error",
         *       "detail": "messages[0].role: must be one of system, user, assistant, tool",
         *       "errors": [
         *         {
         *           "loc": "messages[0].role",
         *           "msg": "must be one of system, user, assistant, tool"
         *         }
         *       ],
         *       "status": 422,
         *       "title": "Validation failed",
         *       "type": "https://contextd.dev/problems/validation_error"
         *     }
         */
        Problem: {
            /** Code */
            code: string;
            /** Detail */
            detail: string;
            /**
             * Errors
             * @default null
             */
            errors?: components["schemas"]["ProblemItem"][] | null;
            /** Status */
            status: number;
            /** Title */
            title: string;
            /** Type */
            type: string;
        } & {
            [key: string]: unknown;
        };
        /** ProblemItem */
        ProblemItem: {
            /** Loc */
            loc: string;
            /** Msg */
            msg: string;
        };
        /** ReleaseIn */
        ReleaseIn: {
            /** Lock Token */
            lock_token: string;
        };
        /** RenewIn */
        RenewIn: {
            /** Lock Token */
            lock_token: string;
            /**
             * Ttl S
             * @default 30
             */
            ttl_s?: number;
        };
        /** RevertIn */
        RevertIn: {
            /** Lock Token */
            lock_token?: string | null;
        };
        /** SearchHit */
        SearchHit: {
            /**
             * Compacted
             * @description at or below the compaction watermark
             */
            compacted: boolean;
            /**
             * Line
             * @description the content line of the match (for `line_start`), if in the content
             */
            line: number | null;
            /**
             * Path
             * @description `/sessions/{id}/messages/{seq}`: the message in full
             */
            path: string;
            /** Role */
            role: string;
            /**
             * Score
             * @description the summed weights of the query terms it matches
             */
            score: number;
            /** Seq */
            seq: number;
            /**
             * Snippet
             * @description about 160 characters around the match
             */
            snippet: string;
            /**
             * Tool Name
             * @description a tool message's tool; the function an assistant message calls first
             */
            tool_name: string | null;
        } & {
            [key: string]: unknown;
        };
        /** SearchOut */
        SearchOut: {
            /**
             * Hits
             * @description best first; newest first among equals
             */
            hits: components["schemas"]["SearchHit"][];
            /** Last Compaction Seq */
            last_compaction_seq: number;
            /** Last Seq */
            last_seq: number;
            /** Query */
            query: string;
        } & {
            [key: string]: unknown;
        };
        /** Session */
        Session: {
            /** Anchors */
            anchors: string[];
            /** Auto Compact */
            auto_compact: boolean;
            budget: components["schemas"]["Budget"];
            /** Compaction */
            compaction: {
                [key: string]: unknown;
            };
            /** Context Limit */
            context_limit: number;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Effective Model */
            effective_model: string;
            /** Id */
            id: string;
            /** Last Compaction Seq */
            last_compaction_seq: number;
            /** Last Seq */
            last_seq: number;
            /**
             * Lease
             * @description the live lease (its token is not shown)
             */
            lease: {
                [key: string]: unknown;
            } | null;
            /** Metadata */
            metadata: {
                [key: string]: unknown;
            };
            /** Model */
            model: string | null;
            /**
             * Recall
             * @description payloads carry the recall tool and note
             * @default false
             */
            recall?: boolean;
            stats: components["schemas"]["SessionStats"];
            /** Strategy */
            strategy: string | null;
            /** System Prompt */
            system_prompt: string | null;
            /** Tokenizer */
            tokenizer: string;
            /** Tools */
            tools: {
                [key: string]: unknown;
            }[];
            /**
             * Updated At
             * Format: date-time
             */
            updated_at: string;
        } & {
            [key: string]: unknown;
        };
        /**
         * SessionBill
         * @description `stats.bill`: the sums of the payload calls' figures, and the saving.
         */
        SessionBill: {
            /**
             * Billed Input Equivalent
             * @description input tokens at the full price that the bill amounts to: uncached input, cached input at 0.1, the summariser's input and output at 1
             */
            billed_input_equivalent: number;
            /**
             * Cached Input Tokens
             * @description the calls' estimates, each replaced by the provider's own figure where a client reported it (POST /sessions/{id}/usage with estimated_cached_input_tokens)
             */
            cached_input_tokens: number;
            /**
             * Calls
             * @description payload calls billed (observe calls are not)
             */
            calls: number;
            /** Full History Input Tokens */
            full_history_input_tokens: number;
            /** Input Tokens */
            input_tokens: number;
            /**
             * Reported Calls
             * @description calls whose cached figure is the provider's
             */
            reported_calls: number;
            /**
             * Saved Tokens
             * @description full_history_input_tokens minus billed_input_equivalent
             */
            saved_tokens: number;
            /**
             * Saving Ratio
             * @description saved_tokens / full_history_input_tokens
             */
            saving_ratio: number;
            /**
             * Summariser Input Tokens
             * @description of every stored compaction
             */
            summariser_input_tokens: number;
            /** Summariser Output Tokens */
            summariser_output_tokens: number;
        } & {
            [key: string]: unknown;
        };
        /** SessionPage */
        SessionPage: {
            /** Next Cursor */
            next_cursor: string | null;
            /** Sessions */
            sessions: components["schemas"]["Session"][];
        } & {
            [key: string]: unknown;
        };
        /**
         * SessionSettingsIn
         * @description Fields left out keep their value; an explicit null resets one to its default.
         */
        SessionSettingsIn: {
            /** Anchors */
            anchors?: string[] | null;
            /** Auto Compact */
            auto_compact?: boolean | null;
            /** Compaction */
            compaction?: {
                [key: string]: unknown;
            } | null;
            /** Context Limit */
            context_limit?: number | null;
            /** Lock Token */
            lock_token?: string | null;
            /** Metadata */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /** Model */
            model?: string | null;
            /** Recall */
            recall?: boolean | null;
            /** Strategy */
            strategy?: string | null;
            /** System Prompt */
            system_prompt?: string | null;
            /** Tools */
            tools?: {
                [key: string]: unknown;
            }[] | null;
        };
        /** SessionStats */
        SessionStats: {
            bill?: components["schemas"]["SessionBill"] | null;
            /** Context Tokens */
            context_tokens: number;
            /** Last Compaction Seq */
            last_compaction_seq: number;
            /** Last Seq */
            last_seq: number;
            /** Message Counts */
            message_counts: {
                [key: string]: number;
            };
            /**
             * Re Reads
             * @description tool calls so far whose name and arguments repeat an earlier call whose result the payload no longer held whole: at or below the watermark (folded into the summary), left out or masked by the stream's last trim (its stored layout, when it still holds for the session's watermark), or over the tool-output preview limit; counted by the append that makes the call, once (a replayed append counts nothing)
             * @default 0
             */
            re_reads?: number;
            /** Token Calibration */
            token_calibration?: {
                [key: string]: unknown;
            } | null;
        } & {
            [key: string]: unknown;
        };
        /**
         * StoredMessage
         * @description A logged message: the message as sent (unknown fields included) plus what contextd keeps.
         */
        StoredMessage: {
            /** Content */
            content?: unknown;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            error?: components["schemas"]["ErrorInfo"] | null;
            /** Id */
            id: string;
            /** Include In Context */
            include_in_context: boolean;
            /** Metadata */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /** Mode */
            mode?: ("chat" | "agent" | "run") | null;
            /** Pinned */
            pinned: boolean;
            /**
             * Role
             * @enum {string}
             */
            role: "system" | "user" | "assistant" | "tool";
            /** Run Id */
            run_id?: string | null;
            /** Seq */
            seq: number;
            /** Token Count */
            token_count: number;
        } & {
            [key: string]: unknown;
        };
        /** StoredRef */
        StoredRef: {
            /** Id */
            id: string;
            /** Seq */
            seq: number;
            /** Token Count */
            token_count: number;
        } & {
            [key: string]: unknown;
        };
        /** SystemMessage */
        SystemMessage: {
            /** Content */
            content: string | {
                [key: string]: unknown;
            }[];
            /**
             * Id
             * @description client-chosen id: a retried append with the same id is stored once
             * @default null
             */
            id?: string | null;
            /**
             * Include In Context
             * @description false: logged, never sent
             * @default null
             */
            include_in_context?: boolean | null;
            /**
             * Metadata
             * @default null
             */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /**
             * Mode
             * @default null
             */
            mode?: ("chat" | "agent" | "run") | null;
            /**
             * Name
             * @default null
             */
            name?: string | null;
            /**
             * Pinned
             * @description always kept in context
             * @default null
             */
            pinned?: boolean | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            role: "system";
            /**
             * Run Id
             * @default null
             */
            run_id?: string | null;
        } & {
            [key: string]: unknown;
        };
        /** TextRange */
        TextRange: {
            /** End */
            end: number;
            /** Start */
            start: number;
            /** Total */
            total: number;
            /**
             * Unit
             * @enum {string}
             */
            unit: "char" | "line";
        } & {
            [key: string]: unknown;
        };
        /** TokenCount */
        TokenCount: {
            /** Messages */
            messages?: number | null;
            /** Model */
            model: string;
            /** Text */
            text?: number | null;
            /** Tokenizer */
            tokenizer: string;
            /** Tokenizer Mode */
            tokenizer_mode: string;
            /** Tools */
            tools?: number | null;
            /** Total */
            total: number;
        } & {
            [key: string]: unknown;
        };
        /** ToolCall */
        ToolCall: {
            function: components["schemas"]["FunctionCall"];
            /** Id */
            id: string;
            /**
             * Type
             * @default function
             * @constant
             */
            type?: "function";
        } & {
            [key: string]: unknown;
        };
        /** ToolMessage */
        ToolMessage: {
            /** Content */
            content: string | {
                [key: string]: unknown;
            }[];
            /** @default null */
            error?: components["schemas"]["ErrorInfo"] | null;
            /**
             * Id
             * @description client-chosen id: a retried append with the same id is stored once
             * @default null
             */
            id?: string | null;
            /**
             * Include In Context
             * @description false: logged, never sent
             * @default null
             */
            include_in_context?: boolean | null;
            /**
             * Metadata
             * @default null
             */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /**
             * Mode
             * @default null
             */
            mode?: ("chat" | "agent" | "run") | null;
            /**
             * Name
             * @default null
             */
            name?: string | null;
            /**
             * Pinned
             * @description always kept in context
             * @default null
             */
            pinned?: boolean | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            role: "tool";
            /**
             * Run Id
             * @default null
             */
            run_id?: string | null;
            /** Tool Call Id */
            tool_call_id: string;
        } & {
            [key: string]: unknown;
        };
        /**
         * UsageIn
         * @description What the provider billed for one payload contextd assembled.
         *
         *     `input_tokens` is every input token of the call: OpenAI's `prompt_tokens` /
         *     `input_tokens` (cached ones included), or Anthropic's `input_tokens`, to which
         *     `cache_creation_input_tokens` and `cache_read_input_tokens` are added when given
         *     (Anthropic reports them apart). `uncalibrated_input_tokens` is the
         *     `usage.uncalibrated_input_tokens` of the context response that was sent.
         */
        UsageIn: {
            /**
             * Cache Creation Input Tokens
             * @default 0
             */
            cache_creation_input_tokens?: number;
            /**
             * Cache Read Input Tokens
             * @default 0
             */
            cache_read_input_tokens?: number;
            /**
             * Cached Input Tokens
             * @description OpenAI's usage.prompt_tokens_details.cached_tokens (Anthropic's is cache_read_input_tokens)
             */
            cached_input_tokens?: number | null;
            /**
             * Estimated Cached Input Tokens
             * @description the usage.cached_input_tokens of the context response that was sent: with the provider's cached figure, the session's bill takes the provider's
             */
            estimated_cached_input_tokens?: number | null;
            /** Input Tokens */
            input_tokens: number;
            /** Lock Token */
            lock_token?: string | null;
            /** Uncalibrated Input Tokens */
            uncalibrated_input_tokens: number;
        };
        /** UsageReport */
        UsageReport: {
            /**
             * Bill Replaced
             * @description the provider's cached figure replaced the estimate
             * @default false
             */
            bill_replaced?: boolean;
            /** Calibration */
            calibration: {
                [key: string]: unknown;
            };
        } & {
            [key: string]: unknown;
        };
        /** UserMessage */
        UserMessage: {
            /** Content */
            content: string | {
                [key: string]: unknown;
            }[];
            /**
             * Id
             * @description client-chosen id: a retried append with the same id is stored once
             * @default null
             */
            id?: string | null;
            /**
             * Include In Context
             * @description false: logged, never sent
             * @default null
             */
            include_in_context?: boolean | null;
            /**
             * Metadata
             * @default null
             */
            metadata?: {
                [key: string]: unknown;
            } | null;
            /**
             * Mode
             * @default null
             */
            mode?: ("chat" | "agent" | "run") | null;
            /**
             * Name
             * @default null
             */
            name?: string | null;
            /**
             * Pinned
             * @description always kept in context
             * @default null
             */
            pinned?: boolean | null;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            role: "user";
            /**
             * Run Id
             * @default null
             */
            run_id?: string | null;
        } & {
            [key: string]: unknown;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz_healthz_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: string;
                    };
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    metrics_metrics_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    readyz_readyz_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_sessions_sessions_get: {
        parameters: {
            query?: {
                cursor?: string | null;
                /** @description at most CONTEXTD_MAX_PAGE_SIZE */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description one page of sessions */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionPage"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_session_sessions__session_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the session */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    put_session_sessions__session_id__put: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionSettingsIn"];
            };
        };
        responses: {
            /** @description the session was updated */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            /** @description the session was created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_session_sessions__session_id__delete: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["LockTokenIn"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_budget_sessions__session_id__budget_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the budget now */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Budget"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    preview_budget_sessions__session_id__budget_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BudgetPreviewIn"];
            };
        };
        responses: {
            /** @description the budget now and after the messages */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BudgetPreview"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    clear_session_sessions__session_id__clear_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["LockTokenIn"] | null;
            };
        };
        responses: {
            /** @description how many messages went; the budget now */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Cleared"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    compact_sessions__session_id__compact_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CompactIn"] | null;
            };
        };
        responses: {
            /** @description the finished job (wait) or the dry-run plan */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactionJob"] | components["schemas"]["CompactionDryRun"];
                };
            };
            /** @description the job, queued or running */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactionJob"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    compaction_state_sessions__session_id__compaction_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description summary, watermark, candidates, recent jobs */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactionState"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    revert_compaction_sessions__session_id__compaction__job_id__revert_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a job id of `GET .../compaction` */
                job_id: string;
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RevertIn"] | null;
            };
        };
        responses: {
            /** @description the watermark and summary restored */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactionRevert"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such session, or no such job in it */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_latest_compaction` (a later compaction is stored, or a clear since), `not_revertable` (the job stored nothing: noop, failed, pending or running), `already_reverted`, or the lease refuses the write */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_context_sessions__session_id__context_get: {
        parameters: {
            query?: {
                /** @description openai (default): Chat Completions `messages`; responses: Responses API `input` items; anthropic: Messages API `system` + `messages` with cache_control breakpoints */
                format?: "openai" | "responses" | "anthropic";
                /** @description the input budget (default: the session's) */
                max_tokens?: number | null;
                mode?: ("chat" | "agent" | "run") | null;
                /** @description tool outputs over this many tokens are sent as previews (default: the larger of CONTEXTD_TOOL_PREVIEW_TOKENS and 1/16 of the input budget) */
                preview_limit_tokens?: number | null;
                /** @description the `prefix_id` of this stream's previous payload: makes `usage.stable_prefix_tokens` exact (without it the previous call is assumed to lack only the newest step) */
                previous_prefix_id?: string | null;
                /** @description the recall tool among `tools`, and a system note on what the payload leaves out (default: the session's `recall` setting) */
                recall?: boolean | null;
                reserve_output_tokens?: number;
                strategy?: string | null;
            };
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the payload in the asked format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ContextPayload"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    post_context_sessions__session_id__context_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ContextIn"];
            };
        };
        responses: {
            /** @description the payload in the asked format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ContextPayload"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_events_sessions__session_id__events_get: {
        parameters: {
            query?: {
                after_id?: number;
                /** @description at most CONTEXTD_MAX_PAGE_SIZE */
                limit?: number;
                /** @description type prefix */
                type?: string | null;
            };
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description one page of events */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventPage"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    claim_sessions__session_id__lock_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ClaimIn"];
            };
        };
        responses: {
            /** @description the lease; send its lock_token with every write */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Lease"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    release_sessions__session_id__lock_delete: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renew_sessions__session_id__lock_renew_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewIn"];
            };
        };
        responses: {
            /** @description the lease with its new expiry */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Lease"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_messages_sessions__session_id__messages_get: {
        parameters: {
            query?: {
                after_seq?: number;
                /** @description only messages with seq below this */
                before_seq?: number | null;
                /** @description only messages from this seq on */
                from_seq?: number | null;
                /** @description at most CONTEXTD_MAX_PAGE_SIZE */
                limit?: number;
                /** @description at most this many characters of text in all */
                max_chars?: number | null;
                /** @description `desc` reads the tail first: the newest `limit` messages */
                order?: "asc" | "desc";
                /** @description only these seqs, as a summary item cites them: "412-431" or "3,7-9" */
                seqs?: string | null;
                /** @description only messages up to this seq */
                to_seq?: number | null;
            };
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description one page of the log */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MessagePage"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    append_messages_sessions__session_id__messages_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AppendIn"];
            };
        };
        responses: {
            /** @description every message was a replay of an earlier id */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendOut"];
                };
            };
            /** @description stored: each message's seq and the session's budget */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendOut"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_messages_sessions__session_id__messages_delete: {
        parameters: {
            query: {
                /** @description first seq to delete */
                from_seq: number;
                /** @description the live lease's token (or in the body) */
                lock_token?: string | null;
            };
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["LockTokenIn"] | null;
            };
        };
        responses: {
            /** @description what was deleted, the new last_seq and budget */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeletedTail"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `below_watermark`, or the lease refuses the write */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_message_sessions__session_id__messages__seq__get: {
        parameters: {
            query?: {
                char_end?: number | null;
                char_start?: number | null;
                line_end?: number | null;
                line_start?: number | null;
            };
            header?: never;
            path: {
                seq: number;
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the message, or the asked range of its text */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MessageOut"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    search_sessions__session_id__search_get: {
        parameters: {
            query?: {
                /** @description only messages with seq below this */
                before_seq?: number | null;
                limit?: number;
                /** @description words, identifiers, any language */
                q?: string | null;
                /** @description only these roles: `roles=user,tool` or `roles=user&roles=tool` */
                roles?: string[] | null;
            };
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description ranked hits with snippets and message paths */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SearchOut"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    report_usage_sessions__session_id__usage_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UsageIn"];
            };
        };
        responses: {
            /** @description the session's calibration after the report */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UsageReport"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    count_tokens_tokens_count_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CountIn"];
            };
        };
        responses: {
            /** @description the counts, per part and in total */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenCount"];
                };
            };
            /** @description missing or wrong API key (when keys are configured) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description no such session or message in the caller's tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held, lock_required, stale_lock_token, idempotency_conflict, or compaction_failed (payloads, with COMPACTION_FAIL_OPEN false) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description body or message larger than the configured limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description validation_error: `errors` names each faulty field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description the database is unreachable; retry after `Retry-After` seconds */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}

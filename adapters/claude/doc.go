// Package claude decodes what Claude Code writes into the provider-neutral
// agent events of package agent, and replays recorded runs as those events
// (ReplayFile, used by `happy replay`, which folds them into a transcript
// with package mapper's reducer).
//
// Three native forms are read, each a stream of newline-delimited JSON
// (see Form): Claude's own session transcript (~/.claude/projects/<slug>/
// <session>.jsonl and its subagent files), the stream-json stdout of
// `claude -p --output-format stream-json --verbose` (one-shot or SDK mode),
// and an SDK traffic log (both directions of SDK mode, package
// adapters/trafficlog). A Decoder maps one line at a time:
//
//	dec, _ := claude.NewDecoder(claude.FormStreamJSON, claude.Options{ControlChannel: true})
//	for each line: events := dec.Decode(line, lineNo)   // or dec.DecodeLine(linereader.Line)
//	at the end:    events := dec.Finish(claude.EndOfStream{Exited: true, Code: &code})
//
// Decoding never panics and never loses a line silently: a line it cannot
// use becomes a DroppedInput event (source claude-jsonl, claude-stream-json
// or claude-traffic, with line number, raw kind, reason, detail and the
// first 512 bytes). Record kinds known to carry nothing for the transcript
// are skipped by an explicit list (the table below), not dropped.
//
// # Live use
//
// A tailer of the session JSONL feeds each complete line (a linereader
// Reader keeps partial ones and gives the offset to resume from), calls Idle
// when Claude's Stop hook fires (the JSONL has no result record), Observe
// for tool states it learnt elsewhere (a PermissionRequest hook), and
// AttachSubagent when it opens <session>/subagents/agent-<id>.jsonl (from the
// .meta.json toolUseId); subagent lines are best fed before the Agent call's
// result, which ends the child session. A resumed tail (a decoder that did
// not see the start) still maps results of calls it never saw: the reducer
// knows them. An SDK-mode stdout is FormStreamJSON with
// Options.ControlChannel; the wrapper's own prompts and answers are not on
// that stream, so it reports them itself (or decodes a traffic log). A live
// SDK wrapper owns the control protocol (package sdk): it skips the control
// lines and hands the decoder each permission request (Asked) and its
// withdrawal (Withdrawn), so what Claude waits for has one source. A request
// that names no call the stream announced blocks a call of its own, whose
// id is the request id (in a traffic log too).
//
// # Identity and merging
//
// Claude writes one line per content block and may write a message twice;
// the decoder merges by provider identity: one assistant message per API
// message (message.id), blocks keyed by their position among the distinct
// blocks of that message (which is the content index that stream_event
// deltas carry), tool calls by tool_use id (a call belongs to the session
// that announced it: a tool_use or tool_result of another session naming
// the same id is Dropped, illegal_transition), records by uuid. A message, call
// or record already closed is recognised from a bounded memory of recent
// identities (Options.Recent); beyond it the reducer's upserts absorb the
// repeat. Open state (turns, messages, tools, subagents) is all the decoder
// keeps, so memory follows what is open, not the length of the stream.
//
// # Turns, steps and tools
//
// A prompt opens a turn (TurnStarted, keyed by Claude's promptId or the
// record uuid; "turn-N" when the stream has no prompt, as in -p stdout). A
// result record ends it in stream-json; a session JSONL has no result, so a
// turn ends at the next prompt, at system/turn_duration, at an interruption
// marker, on Decoder.Idle (a live tailer's quiet point) or at Finish:
// completed when its last step finished without tool calls and nothing is
// open, otherwise interrupted / truncated. Every turn end settles what is
// still open (tools to error, a blocked tool with a rejected resolution),
// so nothing spins forever. A tool_use becomes ToolCall (canonical tool and
// input, tools.go; Claude's name and input in the part's metadata) then
// ToolRunning; its tool_result ToolCompleted or ToolFailed (is_error kept, the
// structured toolUseResult in metadata, and for a long output shown to the
// model as a "<persisted-output>" preview, the stdout Claude kept in
// toolUseResult is the output). A step's stop_reason gives StepFinished;
// stream-json leaves stop_reason null on assistant lines, so a step that
// made tool calls finishes with tool-calls when their results come back,
// and the last step takes the result record's stop_reason.
//
// # Coverage of Claude Code 2.1.197
//
// Claude publishes no schema of these files. The kinds below are those
// observed in real 2.1.197 runs (the captures under testdata/) plus kinds
// other readers of these files document for 2.x; each is mapped, known and
// ignored (with why), or, when unknown, Dropped with reason unknown_type.
//
// Session JSONL (FormSessionJSONL):
//
//	kind                            handling
//	user (prompt)                   mapped: UserPrompt + TurnStarted (closes the previous turn)
//	user (tool_result blocks)       mapped: ToolCompleted / ToolFailed; TodoWrite, TaskCreate,
//	                                TaskUpdate results → TodosUpdated; Agent/Task result → child
//	                                TurnEnded + SubagentEnded; AskUserQuestion answers → ToolResolved
//	user "[Request interrupted by   mapped: the turn's last step StepFinished aborted (even
//	  user…]"                       one that finished with its tool calls), open tools
//	                                settled (a blocked one rejected, answered-in-agent),
//	                                TurnEnded interrupted
//	user "The user doesn't want to  mapped: ToolFailed; when the tool was blocked, ToolResolved
//	  proceed…" tool_result          reject answered-in-agent first
//	user isCompactSummary /         mapped: UserPrompt with Synthetic set (so is a user text that
//	  isVisibleInTranscriptOnly       starts "This session is being continued from a previous
//	                                conversation", the compaction summary, in any form)
//	user <command-name>, <bash-     mapped: UserPrompt without a turn (a command of the terminal
//	  input>, <local-command-       UI; its output, and /compact's own command record,
//	  stdout>, <bash-stdout>        Synthetic); a command that expands into a prompt gets its
//	                                turn from the assistant records
//	user isMeta                     ignored: context Claude injects for the model (skill bodies,
//	                                command caveats), never shown to the person
//	assistant text                  mapped: TextFinal
//	assistant thinking              mapped: ReasoningFinal, signature in metadata
//	assistant redacted_thinking     mapped: ReasoningFinal with metadata redacted=true
//	assistant tool_use,             mapped: ToolCall + ToolRunning; Agent/Task → SubagentStarted;
//	  server_tool_use               AskUserQuestion (no control channel) → ToolBlocked question
//	assistant *_tool_result         mapped: ToolCompleted (server-side tools)
//	assistant usage, stop_reason    mapped: Usage (input, output, cache read/write), StepFinished
//	assistant isApiErrorMessage /   mapped: AgentError with a kind (auth for 401/403, rate_limit
//	  model "<synthetic>"           for 429/529 and limits, transport, protocol, internal)
//	isSidechain / agentId records   mapped: into the child session of their Agent call (linked by
//	                                AttachSubagent, the call's result, or the matching prompt)
//	system/compact_boundary,        mapped: Compaction (auto from compactMetadata.trigger); every
//	  microcompact_boundary           boundary is its own, even under an earlier one's uuid (id
//	                                <uuid>#2, …); one written twice byte for byte counts once
//	system/api_error                mapped: Retry
//	system/turn_duration            mapped: TurnEnded
//	system/stop_hook_summary        ignored: hook bookkeeping, turn_duration follows
//	system/informational,           ignored: notices of the terminal UI
//	  local_command, away_summary
//	attachment hook_permission_     mapped: ToolBlocked (when not blocked yet) + ToolResolved
//	  decision
//	attachment (any other type)     ignored: context for the model (skill and agent listings,
//	                                queued prompts, reminders, file changes)
//	summary, custom-title,          mapped: SessionInfo.Title (a custom title wins)
//	  ai-title
//	file-history-snapshot           ignored: file backups for undo
//	queue-operation                 ignored: the queued prompt arrives as its own user record
//	last-prompt                     ignored: index of the last prompt
//	mode, permission-mode           ignored: terminal UI state
//	progress                        ignored: hook and tool progress
//	pr-link, worktree-state,        ignored: session bookkeeping
//	  agent-name, cost-state,
//	  bridge-session
//
// stream-json stdout (FormStreamJSON), in addition to assistant and user as
// above (parent_tool_use_id puts a record in the child session):
//
//	system/init                     mapped: SessionInfo (+ TurnStarted when no turn is open)
//	system/api_retry                mapped: Retry; when a streamed message broke off (no
//	                                message_stop), the retry is on its step and what it had
//	                                streamed without a complete line is dropped: text and
//	                                thinking emptied (TextFinal / ReasoningFinal ""), a tool
//	                                whose input still streamed ToolFailed
//	system/model_refusal_no_fallback mapped: AgentError with the refusal (content, else
//	                                api_refusal_explanation, else model and category); the
//	                                turn's result then fails with it
//	system/compact_boundary         mapped: Compaction (as in the session JSONL)
//	system/task_started             mapped: links the agent id; SubagentStarted when unseen
//	system/task_notification        mapped: SubagentEnded (completed, failed, killed, stopped)
//	system/status, thinking_tokens  ignored: progress indicators
//	system/task_progress,           ignored: progress of a subagent whose records arrive anyway
//	  task_updated
//	system/hook_started,            ignored: hook bookkeeping
//	  hook_progress, hook_response
//	system/files_persisted          ignored: storage notice
//	result                          mapped: Usage (cost: growth of total_cost_usd since the last
//	                                result of the process, on the turn's last step), AgentError
//	                                for failures, TurnEnded (completed, failed, interrupted);
//	                                a result with no open turn is Dropped (orphan);
//	                                permission_denials ignored: the tool_result carries them
//	stream_event message_start,     mapped: MessageStarted, TextDelta, ReasoningDelta,
//	  content_block_start/delta,    ToolCall (pending) + ToolInputDelta, Usage, StepFinished
//	  message_delta, message_stop
//	stream_event ping,              ignored: keep-alive; the complete block carries them
//	  signature_delta,
//	  citations_delta,
//	  content_block_stop
//	stream_event error              mapped: AgentError
//	control_request can_use_tool    mapped: ToolBlocked (permission = the canonical tool's name,
//	                                patterns from the input, always from permission_suggestions;
//	                                AskUserQuestion → question); a request naming no known
//	                                call → ToolCall (call id = request id) + ToolBlocked
//	control_request hook_callback,  ignored: hooks and MCP traffic of SDK mode
//	  mcp_message, elicitation
//	control_response (from agent)   ignored: answers to the wrapper's own requests (initialize)
//	control_cancel_request          mapped: ToolResolved reject, reason cancelled
//	keep_alive, rate_limit_event,   ignored: connection and quota notices
//	  tool_progress, auth_status
//
// SDK traffic log (FormTrafficLog): a2c messages as stream-json, and
//
//	c2a user                        mapped: UserPrompt (+ TurnStarted when no turn is open)
//	c2a control_response            mapped: ToolResolved: allow → once (always when it adds
//	                                updatedPermissions; answers for a question), deny → reject,
//	                                error → reject cancelled; any other behavior → Dropped
//	                                unknown_decision, never allow
//	c2a control_request interrupt   mapped: the turn's result ends it as interrupted
//	c2a control_request initialize, ignored: session setup
//	  set_permission_mode, set_model,
//	  mcp_*, rewind_files, …
//	a2c user isReplay               ignored: Claude's echo of the c2a prompt
//	exit                            mapped: TurnEnded agent-exited ("agent exited unexpectedly,
//	                                code N"); cost accounting restarts
//	stderr, note                    ignored: diagnostics of the agent and the recorder
//
// Claude 2.x todos and tasks carry no priority while the transcript model
// requires one: they are given medium.
package claude

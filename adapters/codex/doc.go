// Package codex maps OpenAI Codex's native protocols to happy's agent
// events (package agent); its sub-packages run Codex live.
//
// Two protocols, one mapping. Current Codex speaks `codex app-server`
// (line-delimited JSON-RPC without the "jsonrpc" member, protocol v2:
// threads, turns, items); Codex up to 0.153 also had `codex mcp-server`
// (MCP over stdio: one tools/call per prompt, progress as codex/event
// notifications, approvals as elicitation/create). ChooseProtocol picks
// app-server for Codex 0.60.0 and later; happy codex --codex-protocol can
// pin either.
//
// The pieces:
//
//   - AppServerDecoder and MCPDecoder (this package) turn traffic frames
//     (both directions, as in a traffic log) into events. They are
//     deterministic and never panic; a frame they cannot use becomes a
//     DroppedInput with a reason.
//   - Replay decodes a recorded traffic log and ReplayRollout a rollout
//     into events (happy replay reduces them).
//   - codex/appserver and codex/mcp start Codex, decode what crosses the
//     pipe with the same decoders, and carry control the other way:
//     Prompt, Answer, AnswerQuestion, Interrupt, Close; their NewAgent
//     adapts a client to agent.Agent. They share Options, Prompt and the
//     words of their answers (ApprovalAnswer, CancelAnswer, QuestionAnswer)
//     from this package, and the rest from adapters/rpcagent.
//
// Turns never overlap and always end. A prompt sent during a turn waits in
// a queue. A turn ends with Codex's turn/completed (or task_complete /
// turn_aborted); on app-server, if its thread stays silent for
// Options.TurnCheck (the window restarts with every notification of the
// thread or its sub-agents, and is suspended while an approval waits) the
// client asks thread/read whether the turn ended unheard and ends it from
// the answer (regression B13/B16), asking again after each further
// silence. The client never interrupts a silent turn: that is the session
// runner's idle watch. An interrupted turn that Codex does not end is given
// up InterruptGrace later, with a note so that a replay ends it too. A
// sub-agent thread's turn/completed never ends the main turn. Codex
// exiting ends every open turn (agent-exited).
//
// Approvals. item/commandExecution/requestApproval,
// item/fileChange/requestApproval and the legacy execCommandApproval /
// applyPatchApproval (and, on mcp-server, elicitation/create) block the
// tool part, even when the request comes before the item it is about.
// Decisions translate (ApprovalAnswer): once → accept (approved),
// always → acceptForSession (approved_for_session; the proposed exec-policy
// amendment when Codex does not offer acceptForSession), reject → decline
// (denied), an interrupt → cancel (abort). Answers are read back from
// happy's own frames, so the tool's resolution is in the transcript and in
// a replay; an answer that is not a known decision is Dropped
// (unknown_decision), never taken as an approval.
//
// # Coverage: app-server v2 (Codex 0.171.0 schema)
//
// Notifications, mapped:
//
//	thread/started               SessionInfo (main thread: id, model, provider, cwd, name);
//	                             with parentThreadId: SubagentStarted (child session = thread id)
//	thread/name/updated          SessionInfo.Title
//	turn/started                 TurnStarted
//	turn/completed               items never seen are shown, then TurnEnded by status
//	                             (completed | interrupted | failed + AgentError); open tools settle
//	item/started, item/completed the item (see below); a repeat of a completed item is ignored
//	item/agentMessage/delta      TextDelta (block = item id; the final text replaces the deltas)
//	item/plan/delta              TextDelta of the plan item
//	item/reasoning/summaryTextDelta  ReasoningDelta (blank line between summary parts)
//	item/reasoning/textDelta     ReasoningDelta of the raw-reasoning block (item id + "/raw")
//	item/commandExecution/outputDelta, item/fileChange/outputDelta
//	                             buffered per call (incremental UTF-8, head+tail capped at
//	                             96 KiB each); the output when the item has no aggregatedOutput
//	item/fileChange/patchUpdated ToolCall with the new changes
//	turn/plan/updated            TodosUpdated (pending | inProgress | completed)
//	thread/tokenUsage/updated    Usage from "last" (input less cached; cache read/write; reasoning)
//	error                        willRetry: Retry (attempt counted per turn); else AgentError
//	                             (kind from codexErrorInfo; HTTP status when given)
//	thread/compacted             Compaction, unless a contextCompaction item was seen this turn
//	serverRequest/resolved       a request resolved without happy's answer: ToolResolved
//	                             reject / answered-in-agent
//
// Notifications known and deliberately ignored (they carry nothing for
// the transcript; the reasons are in ignoredNotification): thread/status/changed,
// thread/readState/changed, thread/archived, thread/deleted, thread/unarchived,
// thread/closed, thread/reverted, thread/section/changed, thread/attachment/updated,
// thread/goal/updated, thread/goal/cleared, thread/prediction/updated, thread/queue/changed,
// project/changed, thread/project/updated, thread/environment/connected,
// thread/environment/disconnected, thread/settings/updated, skills/changed, hook/started,
// hook/completed, turn/diff/updated, item/autoApprovalReview/started,
// item/autoApprovalReview/completed, autoApprovalReview/strictReviewRequired,
// command/exec/outputDelta, process/outputDelta, process/exited, thread/search/partial,
// item/commandExecution/terminalInteraction, item/reasoning/summaryPartAdded,
// item/mcpToolCall/progress, mcpServer/oauthLogin/completed, mcpServer/startupStatus/updated,
// mcpServer/event/stream/notification, account/updated, account/gatewayOAuth/changed,
// account/rateLimits/updated, account/login/completed, app/list/updated,
// remoteControl/status/changed, externalAgentConfig/import/progress,
// externalAgentConfig/import/completed, fs/changed, model/rerouted, model/verification,
// modelProvider/authRecoveryStarted, modelProvider/authRecoveryCompleted,
// turn/moderationMetadata, model/safetyBuffering/updated, warning, guardianWarning,
// deprecationNotice, configWarning, fuzzyFileSearch/sessionUpdated,
// fuzzyFileSearch/sessionCompleted, thread/realtime/* (eleven methods),
// windows/worldWritableWarning, windowsSandbox/setupCompleted.
//
// Anything else → Dropped (unknown_type, kind = the method). A notification
// for a thread never announced → Dropped (orphan).
//
// Items (ThreadItem.type):
//
//	userMessage          UserPrompt (text parts joined; image → data/URL file, localImage → file://)
//	agentMessage, plan   TextFinal (block = item id)
//	reasoning            ReasoningFinal of the summary (and of the raw content, "/raw")
//	commandExecution     tool bash: ToolCall {command, cwd} (the shell wrapper taken off, see
//	                     UserCommand; the wrapped one in metadata rawCommand) + ToolRunning; completed → ToolCompleted (output,
//	                     metadata exitCode, durationMs); failed → ToolFailed (output, or
//	                     "command failed with exit code N"); declined → ToolFailed "declined"
//	fileChange           tool write {path, content} (one added file) or edit {path, diff,
//	                     oldString?, newString?}; metadata {files:[{path, kind, diff,
//	                     movePath?}], diff}; completed / failed / declined as above
//	mcpToolCall          tool mcp:<server>/<tool>, input = arguments; result text / error message
//	dynamicToolCall      tool other (providerTool "<namespace>_<tool>" or "<tool>"); contentItems
//	                     text; success=false fails
//	collabAgentToolCall  tool task {prompt}; each receiver thread → SubagentStarted (child = thread id);
//	                     an agent state completed | errored | shutdown | interrupted | notFound →
//	                     SubagentEnded; the agents' messages are the tool output
//	subAgentActivity     started | interacted → SubagentStarted; completed | interrupted → SubagentEnded
//	webSearch            tool search {query}; completes with the item
//	imageView            tool read {path}
//	sleep                tool other {durationMs}
//	imageGeneration      tool other; output = saved path; failure fails
//
// Every tool part's metadata has providerTool (the item type) and, when
// the canonical input is not Codex's, providerInput.
//
//	contextCompaction    Compaction (id = item id, auto)
//	exitedReviewMode     TextFinal of the review text
//	hookPrompt, functionCallOutput, enteredReviewMode   known, ignored (ignoredItem says why)
//	anything else        Dropped (unknown_type, kind "item:<type>")
//
// Server requests:
//
//	item/commandExecution/requestApproval, execCommandApproval   ToolBlocked, permission bash
//	                     (pattern = the command as a person types it, /bin/bash -lc stripped;
//	                     metadata rawCommand, reason, cwd, availableDecisions, …)
//	item/fileChange/requestApproval, applyPatchApproval          ToolBlocked, permission edit
//	                     (or write: the tool's name; patterns = the file paths)
//	item/tool/requestUserInput   ToolBlocked with a question (answers via AnswerQuestion)
//	                     (a request of a thread never announced opens a child session for it,
//	                     SubagentStarted without a call; one naming no thread is the main thread's)
//	mcpServer/elicitation/request, item/permissions/requestApproval, item/tool/call,
//	account/chatgptAuthTokens/refresh, attestation/generate
//	                     known; refused by the client with a JSON-RPC error (method not found)
//	anything else        Dropped (unknown_type); the client refuses it the same way
//
// Responses to happy's requests: thread/start, thread/resume → SessionInfo;
// turn/start → TurnStarted when turn/started has not come yet; thread/read →
// the reconciliation above; an error to turn/start, thread/start or
// thread/resume → AgentError (protocol). Happy's own frames: requests are
// remembered (to read their responses); answers to approvals →
// ToolResolved. Traffic-log records: exit → TurnEnded agent-exited for open
// turns; the client's "turn-abandoned" note → TurnEnded interrupted;
// stderr → ignored (kept in the log).
//
// # Coverage: mcp-server (codex/event, Codex ≤ 0.153)
//
// Mapped: session_configured (SessionInfo), task_started / turn_started
// (TurnStarted), task_complete / turn_complete (TurnEnded completed),
// turn_aborted (TurnEnded interrupted), user_message and item UserMessage
// (UserPrompt, once per turn; happy's tools/call prompt comes first),
// agent_message_content_delta / agent_message_delta (TextDelta),
// agent_message and item AgentMessage (TextFinal), agent_reasoning(_delta),
// agent_reasoning_raw_content(_delta), agent_reasoning_section_break
// (reasoning blocks), exec_command_begin / exec_command_output_delta (chunk
// as text, base64 or a byte array, B15) / exec_command_end (bash tool),
// patch_apply_begin / patch_apply_end (edit or write tool), mcp_tool_call_begin /
// mcp_tool_call_end (mcp:<server>/<tool>), web_search_begin / web_search_end
// (search), view_image_tool_call (read); providerTool is the event's family
// (exec_command, patch_apply, mcp_tool_call, web_search, view_image),
// token_count (Usage), plan_update (TodosUpdated), error (AgentError),
// stream_error (Retry), context_compacted (Compaction), exited_review_mode
// (TextFinal). exec_approval_request / apply_patch_approval_request give
// their detail to the elicitation/create request that follows, which blocks
// the tool (exec-approval, patch-approval; other elicitation kinds →
// Dropped). The elicitation's call is its codex_call_id, else the call the
// approval event named by its codex_event_id announced, else a tool part
// of its own ("elicitation-N", metadata uncorrelatedApproval, completed
// once approved): see MCPApprovals; an approval is never answered without
// a person or a rule deciding. Events without _meta.requestId (older
// Codex) belong to the open turn, else to the turn of the tools/call just
// sent. The tools/call response ends its turn if task_complete did not;
// a response for a turn already ended is discarded (B13).
//
// Known and ignored (ignoredEvent says why): mcp_startup_update,
// mcp_startup_complete, mcp_list_tools_response, list_custom_prompts_response,
// get_history_entry_response, raw_response_item, raw_response_completed,
// turn_diff, background_event, warning, deprecation_notice, shutdown_complete,
// conversation_path, terminal_interaction, reasoning_content_delta,
// reasoning_raw_content_delta, entered_review_mode, undo_started,
// undo_completed, item_updated; item_started / item_completed of items other
// than user and agent messages (the legacy events above carry them); MCP
// housekeeping notifications (notifications/message, progress,
// */list_changed, cancelled). Anything else → Dropped (unknown_type, kind
// "codex/event:<type>" or the method).
//
// Not yet: file diffs become patch parts only once the event vocabulary has
// an event for them (today they are in the tool's metadata); command output
// is shown when the command ends, not while it streams.
package codex

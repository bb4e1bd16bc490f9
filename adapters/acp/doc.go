// Package acp runs any Agent Client Protocol agent (Gemini CLI `gemini
// --acp`, claude-code-acp, `opencode acp`, …) as a happy agent and maps its
// traffic to happy's agent events (package agent).
//
// ACP is line-delimited JSON-RPC 2.0 over the agent's stdio, protocol
// version 1 (the schema is in testdata/schema, unchanged from the
// protocol's repository). happy is the client: it starts the agent,
// initializes, opens a session, sends prompts, answers the agent's
// permission requests and serves its file-system and terminal requests.
//
// The pieces:
//
//   - Decoder turns traffic frames (both directions, as in a traffic log)
//     into events. It is deterministic and never panics; a frame it cannot
//     use becomes a DroppedInput with a reason.
//   - Client starts the agent, runs the same decoder on what crosses the
//     pipe, and carries control the other way: Prompt, Decide, Interrupt,
//     SetMode, Close. It is built on adapters/rpcagent (turns, pending
//     permissions, event holding, shutdown). Agent adapts it to
//     agent.Agent.
//   - Replay decodes a recorded traffic log into events (happy replay
//     reduces them).
//
// # Lifecycle
//
// initialize offers protocolVersion 1 and the client capabilities happy
// really has: fs.readTextFile and fs.writeTextFile (confined to the
// session's working folder through an os.Root: a relative path, a path
// outside it, through ".." or through a symlink leading out is refused
// with invalid-params, a missing file with resource-not-found; absolute
// symlinks are refused even when they point inside), terminal (each
// command in its own process group, stdout and stderr merged, output kept
// up to its byte limit and cut at the front on a character boundary; a
// lone command string with shell syntax runs through /bin/sh -c).
// An agent that answers with another protocol version is refused with a
// *VersionError naming the version happy speaks and the one the agent
// stated (nil, never 0, when it stated none). Then session/new (with the
// configured MCP servers), or when asked to continue a session
// session/resume when the agent advertises sessionCapabilities.resume
// (nothing is replayed), else session/load when it advertises loadSession
// (with Options.HistoryKnown, after a history-known note: the history the
// agent replays, until the next prompt, is left out and counted, the
// transcript having it already; without, it is decoded as the session's
// history; either way the first prompt waits until the replay has been
// quiet for 150 ms), else
// ErrUnsupported naming the agent and what it lacks. When session/new answers
// "authentication required" (-32000), happy authenticates with the
// configured method and tries once more; without one the error lists the
// methods the agent offers. session/set_mode selects a mode the agent
// listed.
//
// Turns never overlap: a prompt sent while one runs waits in a queue. The
// prompt's stopReason ends the turn (no idle timers): end_turn → completed
// (finish stop or tool-calls), max_tokens and max_turn_requests → the step
// finishes with length, refusal → failed (finish error), cancelled →
// interrupted (finish aborted); an error response → failed with the
// agent's error. A cancelled stop happy never asked for (no session/cancel)
// in a turn where happy rejected a permission (a person, a rule, the
// permission timeout) ends the turn completed: the agent stopped because
// of the rejection (codex-acp's one rejection option, "abort", ends the
// prompt that way), so the run reports a rejected permission, not an
// interrupt. After happy sent session/cancel, whatever the agent
// answers ends the turn interrupted (B20). Every pending permission is
// answered {"outcome":{"outcome":"cancelled"}} when the turn is cancelled;
// if the agent does not answer the prompt within CancelGrace the turn is
// given up (a note in the traffic makes a replay do the same) and the
// agent is restarted, its session loaded (or resumed) again. The agent
// exiting ends the open turn (agent-exited); open tools are settled by the
// reducer at every turn end.
//
// # Permissions
//
// session/request_permission blocks the tool part, creating it from
// params.toolCall when the agent never announced it (Gemini CLI, B18).
// params.toolCall updates the announced call, but it neither moves it (its
// status) nor takes back what the agent said: input members and locations
// it leaves out stay (OpenCode asks with the command alone). The
// permission's name is the tool's canonical name (tools.go: a shell
// command is bash whatever its kind, so the rule "bash:git status*" covers
// codex-acp's commands too), its patterns those of the canonical input
// (the command, the path, …), else the paths it touches, else its title;
// the options offered are kept in the block's metadata, and a rawInput of
// the request that is not the tool's input (OpenCode's diff) as its
// rawInput. Answers are chosen by option kind only (Choose):
// once → allow_once; always → allow_always, else allow_once; reject →
// reject_once (reject_always only when asked), else cancelled; a rejection
// nobody typed (timeout, agent-exited, a rule) is answered the same way,
// with reject_once, so only the tool is refused; cancelled is sent only
// when the turn itself is aborted (reason cancelled). The
// response has the schema's nested shape {"outcome":{"outcome":"selected",
// "optionId":…}}; Decide answers every request pending for the call, each
// exactly once. A call id that
// the agent reuses in a later turn is given a new canonical call id
// (<id>#2, …), so unrelated calls are not merged; the decoder remembers
// the last RecentCallIDs canonical ids for this, so its memory stays
// bounded in a long session. Before answering, the
// live client writes a note {"happy":"decision",…} into the traffic so a
// replay resolves the tool with the reason the runner saw (timeout, …).
// The answer on the wire wins: a note that contradicts it is recorded as
// dropped, and it stands in only for a wire answer that cannot be read. A
// replayed log that ends inside a turn ends that turn as truncated
// (Decoder.Finish).
//
// # Coverage: session/update kinds (ACP v1)
//
// Mapped:
//
//	user_message_chunk       during a session/load's replay (until the next prompt, since
//	                         agents go on after the answer): UserPrompt (consecutive chunks are one
//	                         prompt; images and resources become files); during a prompt
//	                         turn: the echo of happy's prompt, already recorded: ignored.
//	                         Every history kind (user, agent and thought chunks, tool
//	                         calls and updates, plan, usage) is left out, counted, after a
//	                         history-known note from the load until the next prompt
//	agent_message_chunk      TextDelta (block = messageId when given); an empty chunk
//	                         carries nothing; images, audio and resources are rendered
//	                         as Markdown (the transcript has no assistant file part)
//	agent_thought_chunk      ReasoningDelta, as above
//	tool_call                ToolCall upsert by toolCallId (a repeat merges) + the status
//	tool_call_update         the same; an update for an unknown id creates the part.
//	                         Tool and input are canonical (tools.go: from the agent's own
//	                         tool name where the traffic gives it, a rawInput command, the
//	                         kind; the input from rawInput, locations, diff content and the
//	                         title); part metadata: providerTool (the agent's name, else
//	                         the kind), providerInput (rawInput, when not the canonical
//	                         input), locations, description (content shown before the tool
//	                         ran), diffs, terminals. Status: in_progress → ToolRunning,
//	                         completed → ToolCompleted (output = its text content, else the
//	                         embedded terminals' output, else rawOutput: a string, text
//	                         blocks, or an object's output, aggregated_output, stdout…;
//	                         images → attachments; metadata rawOutput, diffs, terminal exit
//	                         statuses), failed → ToolFailed (the same text as its error).
//	                         A completed todo tool with rawInput.todos (OpenCode's
//	                         todowrite) → TodosUpdated, until the agent sends a plan
//	plan                     TodosUpdated (pending | in_progress | completed, priorities)
//	current_mode_update      SessionInfo.Agent
//	config_option_update     SessionInfo: category mode → Agent, model → ModelID
//	session_info_update      SessionInfo.Title (a null title cannot clear it)
//	usage_update             Usage: used → tokens.input of the current step; cost (USD)
//	                         → the step's share of the cumulative cost; held until the
//	                         turn has assistant output, or until it ends without any
//	                         (then the usage of the turn's step without content)
//
// Known and deliberately ignored: available_commands_update (slash commands:
// nothing in the transcript lists them), session_info_update.updatedAt,
// usage_update.size, other config option categories, the content and
// location items the schema lets a reader skip (each skipped item is still
// recorded as a Dropped), _meta everywhere (the protocol says to assume
// nothing about it). Any other sessionUpdate → Dropped (unknown_type, kind
// "session/update:<kind>"); a malformed update (no sessionUpdate, params not
// an object, a content block missing what its type requires) → Dropped
// (invalid_field); an unknown content type → Dropped (unknown_type); an
// update for a session never opened → Dropped (orphan); turn output
// (chunks, tool calls) outside a prompt turn or a session load, such as a
// chunk arriving after the prompt's response, → Dropped (orphan) and never
// reopens the turn.
//
// # Coverage: other methods
//
// Agent requests: session/request_permission (above); fs/read_text_file,
// fs/write_text_file (a write is recorded as a FileDiff in the metadata of
// the tool working on that path, from the client's fs-write note); terminal/
// create, output, wait_for_exit, kill, release (a terminal's output and exit
// status feed the tool that embeds it). elicitation/create and extension
// methods ("_…") are refused with method-not-found and carry nothing;
// anything else → Dropped (unknown_type) and refused the same way.
// Agent notifications: $/cancel_request withdraws a pending permission
// (ToolResolved reject, cancelled); elicitation/complete, "_…" and other
// "$/…" notifications are ignored as the protocol asks; anything else →
// Dropped (unknown_type). Responses to happy's requests: initialize (version
// check; a refusal → AgentError protocol), session/new (SessionInfo: session
// id, cwd, mode, model from the unstable "models" member or a model config
// option), session/load and session/resume (the same), session/set_mode
// (SessionInfo.Agent), session/set_config_option, session/prompt (turn end,
// above); a response to an id happy never sent → Dropped (orphan); errors
// of initialize, authenticate, session/new|load|resume → AgentError (auth
// for -32000, protocol for JSON-RPC errors, else internal). happy's own
// frames: session/prompt → TurnStarted (+ UserPrompt in a replay),
// session/cancel marks the turn cancelled, answers to permission requests →
// ToolResolved (in a replay). Traffic-log records: exit → TurnEnded
// agent-exited for an open turn (unless the client announced a restart);
// stderr → ignored (kept in the log); notes other than happy's → ignored;
// a line that is not a traffic record → Dropped.
//
// JSON-RPC frames are accepted with or without the "jsonrpc" member (the
// schema requires it; a missing one is tolerated rather than losing a
// turn's end).
package acp

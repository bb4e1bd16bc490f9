package acp

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// sessionUpdate decodes a session/update notification.
func (d *Decoder) sessionUpdate(m jsonrpc.Message) {
	var p, u obj
	var ok, split bool
	if d.general {
		p, ok = members(m.Params)
	} else {
		// The update, the last member as agents write it, split with the
		// params in one scan.
		p, u, ok, split = membersLast(m.Params, "update")
	}
	if !ok {
		d.drop(m.Method, agent.DropInvalidField, "params is not a SessionNotification object", m.Raw)
		return
	}
	// A session id or kind written plainly is looked up as it lies in
	// the frame (plainStr): no string is made for it.
	if b, plain := d.plainStr(p.get("sessionId")); !plain || len(b) == 0 || !d.sessions.GetBytes(b) {
		sid, ok := str(p.get("sessionId"))
		if !ok || sid == "" {
			d.drop(m.Method, agent.DropMissingID, "session/update without sessionId", m.Raw)
			return
		}
		if !d.sessions.Get(sid) {
			d.drop(m.Method, agent.DropOrphan, "session "+strconv.Quote(sid)+" was never opened", m.Raw)
			return
		}
	}
	if !split {
		u, ok = members(p.get("update"))
	}
	if !ok {
		d.drop(m.Method, agent.DropInvalidField, "update is not an object", m.Raw)
		return
	}
	var kind, k string
	if b, plain := d.plainStr(u.get("sessionUpdate")); plain {
		if e, known := updateKinds[string(b)]; known {
			kind, k = e[0], e[1]
		}
	}
	if kind == "" {
		kind, ok = str(u.get("sessionUpdate"))
		if !ok {
			d.drop(m.Method, agent.DropInvalidField, "update without a sessionUpdate string", m.Raw)
			return
		}
		e, known := updateKinds[kind]
		k = e[1]
		if !known {
			k = "session/update:" + kind
		}
	}
	if d.skipping && historyKinds[kind] {
		// The conversation a load replays is in the transcript already.
		d.skipped++
		return
	}
	prev := d.lastKind
	d.lastKind = kind
	switch kind {
	case "user_message_chunk":
		d.userChunk(k, &u, prev, m.Raw)
	case "agent_message_chunk", "agent_thought_chunk":
		d.agentChunk(k, kind == "agent_thought_chunk", &u, m.Raw)
	case "tool_call", "tool_call_update":
		d.toolUpdate(k, kind == "tool_call", &u, m.Raw)
	case "plan":
		d.plan(k, &u, m.Raw)
	case "available_commands_update":
		// The agent's slash commands: nothing in the transcript shows them.
		if !d.isArray(u.get("availableCommands")) {
			d.drop(k, agent.DropInvalidField, "availableCommands is not an array", m.Raw)
		}
	case "current_mode_update":
		id, ok := str(u.get("currentModeId"))
		if !ok {
			d.drop(k, agent.DropInvalidField, "currentModeId is not a string", m.Raw)
			return
		}
		d.emit(&agent.SessionInfo{Agent: id})
	case "config_option_update":
		info := &agent.SessionInfo{}
		if u.get("configOptions") == nil || !d.configOptions(info, u.get("configOptions")) {
			d.drop(k, agent.DropInvalidField, "configOptions is not an array", m.Raw)
			return
		}
		if info.Agent != "" || info.ModelID != "" {
			d.emit(info)
		}
	case "session_info_update":
		// A null title would clear it; the transcript keeps the last one.
		if title, ok := str(u.get("title")); ok && title != "" {
			d.emit(&agent.SessionInfo{Title: title})
		}
	case "usage_update":
		d.usage(k, &u, m.Raw)
	default:
		d.drop(k, agent.DropUnknownType, "unknown session update kind", m.Raw)
	}
}

// updateKinds are the drop kinds of the known session updates
// ("session/update:<kind>"), made once.
// by kind: the kind itself and its drop kind.
var updateKinds = func() map[string][2]string {
	m := map[string][2]string{}
	for _, k := range []string{"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
		"plan", "available_commands_update", "current_mode_update", "config_option_update", "session_info_update", "usage_update"} {
		m[k] = [2]string{k, "session/update:" + k}
	}
	return m
}()

// historyKinds are the updates a session/load replays the conversation
// with; the session's state (modes, commands, config, title) is not history
// and is read during a load too.
var historyKinds = map[string]bool{"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true, "usage_update": true}

// SkippedHistory reports how many replayed updates were left out since it
// was last called and starts the count again. They are the history
// updates (chunks, tool calls, plans, usage) from a session/load that
// follows a history-known note until the next session/prompt: the
// conversation the transcript holds already (see docs/ARCHITECTURE.md,
// resume).
func (d *Decoder) SkippedHistory() int {
	n := d.skipped
	d.skipped = 0
	return int(n)
}

// inTurnOrLoad reports whether turn-scoped output is expected now; when it
// is not, the update is dropped as an orphan (a late chunk after the turn
// ended must not reopen it).
func (d *Decoder) inTurnOrLoad(kind string, raw []byte) bool {
	if d.turn != nil || d.loading {
		return true
	}
	d.drop(kind, agent.DropOrphan, "output outside a prompt turn", raw)
	return false
}

func (d *Decoder) chunkBlock(kind string, u *obj, raw []byte) (contentBlock, string, bool) {
	if u.get("content") == nil {
		d.drop(kind, agent.DropInvalidField, "chunk without content", raw)
		return contentBlock{}, "", false
	}
	b, err := d.block(u.get("content"))
	if err != nil {
		reason := agent.DropInvalidField
		if errors.Is(err, errUnknownContent) {
			reason = agent.DropUnknownType
		}
		d.drop(kind, reason, err.Error(), raw)
		return contentBlock{}, "", false
	}
	msgID, _ := str(u.get("messageId")) // default on error: absent
	return b, msgID, true
}

// userChunk: during a prompt turn the agent echoes the prompt happy sent
// (already recorded); during session/load it replays the history, and
// consecutive user chunks make one prompt.
func (d *Decoder) userChunk(kind string, u *obj, prev string, raw []byte) {
	b, _, ok := d.chunkBlock(kind, u, raw)
	if !ok {
		return
	}
	if d.turn != nil {
		return
	}
	if !d.loading {
		d.drop(kind, agent.DropOrphan, "user message outside a prompt turn or a session load", raw)
		return
	}
	if d.replay == nil {
		d.replay = &loadReplay{}
	}
	r := d.replay
	if prev != "user_message_chunk" || r.key == "" {
		r.seq++
		r.key = "load-" + strconv.Itoa(r.seq)
		r.text.Reset()
		r.files = nil
	}
	if b.Type == "text" {
		r.text.WriteString(b.Text)
	} else if f, ok := b.promptFile(); ok {
		r.files = append(r.files, f)
	}
	d.turnStep, d.stepResult = false, false
	d.emit(&agent.UserPrompt{PromptID: r.key, Text: r.text.String(), Files: slices.Clone(r.files)})
}

func (d *Decoder) agentChunk(kind string, thought bool, u *obj, raw []byte) {
	b, msgID, ok := d.chunkBlock(kind, u, raw)
	if !ok || !d.inTurnOrLoad(kind, raw) {
		return
	}
	text := b.markdown()
	if text == "" {
		return // an empty chunk carries nothing (claude-code-acp opens each message with one)
	}
	d.beginOutput()
	if thought {
		d.emit(&agent.ReasoningDelta{Block: msgID, Delta: text})
	} else {
		d.emit(&agent.TextDelta{Block: msgID, Delta: text})
	}
	d.flushUsage(false)
}

// validKinds are the ToolKind values of the schema.
// Each maps to itself, the string kept (see enum).
var validKinds = selfMap("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other")

// validStatus are the ToolCallStatus values of the schema, each mapped to
// itself.
var validStatus = selfMap("pending", "in_progress", "completed", "failed")

// selfMap maps each of keys to itself.
func selfMap(keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = k
	}
	return m
}

// mergeTool applies the fields of a ToolCall or ToolCallUpdate to tl.
// Fields the schema lets a reader default on error (kind, status, content
// and location items) are defaulted or skipped; each skipped item is
// recorded as a Dropped. A change of what the canonical form is computed
// from counts in the tool's revision (changedSince).
func (d *Decoder) mergeTool(kind string, tl *tool, u *obj) {
	before := fieldsOf(tl)
	d.mergeFields(kind, tl, u)
	tl.changedSince(&before)
}

// mergeFields is mergeTool, the fields applied.
func (d *Decoder) mergeFields(kind string, tl *tool, u *obj) {
	if b, plain := d.plainStr(u.get("title")); plain && string(b) == tl.title {
		// The same title again: the string the tool has is kept.
		if !tl.merged {
			tl.firstTitle = tl.title
		}
	} else if s, ok := str(u.get("title")); ok {
		tl.title = s
		if !tl.merged {
			tl.firstTitle = s
		}
	}
	tl.merged = true
	if meta, ok := members(u.get("_meta")); ok {
		if cc, ok := members(meta.get("claudeCode")); ok {
			if b, plain := d.plainStr(cc.get("toolName")); plain && len(b) > 0 && string(b) == tl.metaTool {
				// The same name again: kept.
			} else if name, ok := str(cc.get("toolName")); ok && name != "" {
				tl.metaTool = name
			}
		}
	}
	if s, ok := d.enum(u.get("kind"), validKinds); ok {
		tl.kind = s
	}
	if s, ok := d.enum(u.get("status"), validStatus); ok {
		tl.status = s
	}
	if raw := u.get("rawInput"); !isNull(raw) {
		tl.rawInput = raw
	}
	if raw := u.get("rawOutput"); !isNull(raw) {
		tl.rawOutput = raw
	}
	var buf [8]json.RawMessage
	if raw := u.get("content"); !isNull(raw) {
		if items, ok := d.array(buf[:0], raw); !ok {
			d.drop(kind, agent.DropInvalidField, "tool content is not an array", raw)
		} else {
			// The items are decoded into a buffer of the call's own first:
			// content the same as the tool's (an update that repeats it)
			// keeps the tool's slice, which the caches keyed on it
			// (metaKey, diffsValue) then find unchanged. Other content is
			// written over the tool's own array when it has room (nothing
			// else holds the array: events copy what they take of it), else
			// into a new array of exactly the items, and counted
			// (contentGen) for those caches.
			var cbuf [4]toolContent
			fresh := cbuf[:0]
			// Content that comes with (or after) the tool's start is its
			// output; before that, agents put a description there.
			st, _ := d.enum(u.get("status"), validStatus) // only the schema's statuses count below
			tl.outContent = tl.running || st == "in_progress" || st == "completed" || st == "failed"
			for _, it := range items {
				c, err := d.toolContent(it)
				if err != nil {
					reason := agent.DropInvalidField
					if errors.Is(err, errUnknownContent) {
						reason = agent.DropUnknownType
					}
					d.drop(kind+":content", reason, err.Error(), it)
					continue
				}
				fresh = append(fresh, c)
			}
			switch {
			case len(items) == 0:
				tl.content = tl.content[:0:0]
				tl.contentGen++
			case len(fresh) > 0 && sameContent(fresh, tl.content):
				// The same content: the tool's slice kept.
			default:
				if cap(tl.content) >= len(fresh) && len(fresh) > 0 {
					tl.content = tl.content[:len(fresh)]
				} else {
					tl.content = make([]toolContent, len(fresh))
				}
				copy(tl.content, fresh)
				tl.contentGen++
			}
			tl.noteHints()
		}
	}
	if raw := u.get("locations"); !isNull(raw) {
		if items, ok := d.array(buf[:0], raw); !ok {
			d.drop(kind, agent.DropInvalidField, "locations is not an array", raw)
		} else {
			old := tl.locations
			tl.locations = tl.locations[:0:0]
			if len(items) > 0 {
				tl.locations = make([]location, 0, len(items))
			}
			for _, it := range items {
				var l location
				m, ok := members(it)
				// The location at the same place before, when it has the
				// same path written plainly: its strings and line are
				// shared (a location is never changed in place).
				var prev *location
				if j := len(tl.locations); j < len(old) {
					if b, plain := d.plainStr(m.get("path")); plain && ok && string(b) == old[j].Path {
						prev = &old[j]
					}
				}
				okp := prev != nil
				if okp {
					l.Path = prev.Path
				} else {
					l.Path, okp = str(m.get("path"))
				}
				if !ok || !okp {
					d.drop(kind+":location", agent.DropInvalidField, "location needs a path", it)
					continue
				}
				if line, ok := d.int64Of(m.get("line")); ok && line >= 0 {
					if prev != nil && prev.Line != nil && *prev.Line == line {
						l.Line = prev.Line
					} else {
						n := line
						l.Line = &n
					}
				}
				tl.locations = append(tl.locations, l)
			}
		}
	}
}

// toolFor returns the tool of an ACP tool call id in the current turn's
// scope, creating it. A call id the agent reuses in a later turn gets a
// new canonical call id (B18: parts are scoped per turn, so unrelated
// calls are not merged).
func (d *Decoder) toolFor(acpID string) (*tool, bool) {
	if tl := d.tools.Get(acpID); tl != nil {
		return tl, false
	}
	callID := acpID
	for n := 2; d.callIDs.has(callID); n++ {
		callID = acpID + "#" + strconv.Itoa(n)
	}
	d.callIDs.add(callID)
	d.toolSeq++
	tl := d.newTool()
	tl.acpID, tl.callID, tl.seq = acpID, callID, d.toolSeq
	d.tools.Put(acpID, tl)
	return tl, true
}

func (d *Decoder) sortedTools() []*tool {
	out := make([]*tool, 0, d.tools.Len())
	for tl := range d.tools.Values() {
		out = append(out, tl)
	}
	slices.SortFunc(out, func(a, b *tool) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (d *Decoder) toolUpdate(kind string, announce bool, u *obj, raw []byte) {
	var id string
	if b, plain := d.plainStr(u.get("toolCallId")); plain && len(b) > 0 {
		if tl := d.tools.GetBytes(b); tl != nil {
			id = tl.acpID // a tool of the turn's: its id string is kept
		}
	}
	if id == "" {
		var ok bool
		if id, ok = str(u.get("toolCallId")); !ok || id == "" {
			d.drop(kind, agent.DropMissingID, "tool call without toolCallId", raw)
			return
		}
	}
	if !d.inTurnOrLoad(kind, raw) {
		return
	}
	tl, created := d.toolFor(id)
	if created && tl.kind == "" {
		tl.kind = "other"
	}
	d.mergeTool(kind, tl, u)
	if created && announce && tl.status == "" {
		tl.status = "pending"
	}
	if created {
		d.beginOutput()
	}
	d.announce(tl, !created && (tl.status == "completed" || tl.status == "failed"))
	d.advance(tl)
	if created {
		d.flushUsage(false)
	}
}

// announcedMeta is the metadata of the tool's announcement (one-pass
// form): the part metadata (where the tool works, what it showed while
// pending, the diffs it proposed and the files happy wrote for it) over
// base, the canonical metadata of generation baseGen (canonicalOf), in
// one object, and the generation of that object: the same generation, the
// same object, which the events that carry it share and nothing changes.
// The part's members are put straight into a copy of base, not into an
// object of their own that is then merged (one map an announcement, not
// two).
func (d *Decoder) announcedMeta(tl *tool, baseGen uint64) (agent.Object, uint64) {
	key := metaKeyOf(tl)
	c := &tl.meta
	if c.gen != 0 && c.baseGen == baseGen && c.key.same(key) {
		return c.obj, c.gen
	}
	pm := d.partMetaParts(tl)
	if c.gen != 0 && c.baseGen == baseGen && pm.sameOver(c.obj, d.baseKeys(tl, &pm)) {
		// Built from other content, locations or writes, but the same
		// members (an update that brings output content leaves the part's
		// metadata as it was): the object and its generation are kept.
		c.key = key
		return c.obj, c.gen
	}
	obj := d.partMetaOver(&pm, tl, baseGen)
	d.gen++
	c.key, c.obj, c.baseGen, c.gen = key, obj, baseGen, d.gen
	return obj, d.gen
}

// baseKeys is how many members of the tool's canonical metadata (its
// cache, canonCache) are not the part's: those an object announcedMeta
// makes has besides the part's members.
func (d *Decoder) baseKeys(tl *tool, pm *partMetaMembers) int {
	if tl.canon.deferred {
		// providerTool (none for no provider) and providerInput.
		if provider, _ := d.providerOf(tl); provider != "" {
			return 2
		}
		return 1
	}
	n := 0
	for k := range tl.canon.meta {
		if !pm.has(k) {
			n++
		}
	}
	return n
}

// partMetaOver is base, the tool's canonical metadata of generation
// baseGen (canonicalDeferred), with the part metadata's members over its
// own, as the general form merges the two objects (base shared when the
// part has none, an empty object rather than nil when neither has
// members). A deferred base (canonCache.deferred) under part members is
// not made: its members go straight into the one object made here.
func (d *Decoder) partMetaOver(pm *partMetaMembers, tl *tool, baseGen uint64) agent.Object {
	if pm.count() > 0 && tl.canon.deferred {
		m := make(agent.Object, 2+pm.count())
		provider, raw := d.providerOf(tl)
		if d.putProviderInput(m, tl, provider, raw) && pm.putNormal(m) {
			return m
		}
	}
	base := d.canonMeta(tl, baseGen)
	if pm.count() > 0 && len(base) > 0 {
		m := make(agent.Object, len(base)+pm.count())
		maps.Copy(m, base)
		if pm.putNormal(m) {
			return m
		}
		// A member the one-pass conversion leaves to toObject: the part's
		// object is made apart, as the general form makes it.
	}
	part := d.buildPartMeta(*pm)
	switch {
	case len(part) == 0 && len(base) > 0:
		return base
	case len(base) == 0 && len(part) > 0:
		return part
	}
	m := make(agent.Object, len(base)+len(part))
	maps.Copy(m, base)
	maps.Copy(m, part)
	return m
}

// partMetaMembers are the members of a tool's part metadata, before they
// make an object: each present or not.
type partMetaMembers struct {
	locations        json.RawMessage // locationsValue: their JSON text
	diffs            any
	desc             string
	terminals        []string
	hasLoc, hasDiffs bool
}

// partMetaParts computes the members of the tool's part metadata.
func (d *Decoder) partMetaParts(tl *tool) partMetaMembers {
	var pm partMetaMembers
	if len(tl.locations) > 0 {
		pm.locations, pm.hasLoc = d.locationsValue(tl), true
	}
	if !tl.outContent {
		pm.desc = tl.text()
	}
	pm.diffs, pm.hasDiffs = d.diffsValue(tl)
	pm.terminals = tl.terminalIDs()
	return pm
}

// count is how many members the part metadata has.
func (pm *partMetaMembers) count() int {
	n := 0
	for _, has := range [...]bool{pm.hasLoc, pm.desc != "", pm.hasDiffs, len(pm.terminals) > 0} {
		if has {
			n++
		}
	}
	return n
}

// has reports whether k is one of the part metadata's members.
func (pm *partMetaMembers) has(k string) bool {
	switch k {
	case "locations":
		return pm.hasLoc
	case "description":
		return pm.desc != ""
	case "diffs":
		return pm.hasDiffs
	case "terminals":
		return len(pm.terminals) > 0
	}
	return false
}

// putNormal sets the members in m, converted as normalize converts them
// (the locations are their text, set as they are); false when one is not
// (m is then partly set, for the caller to drop).
func (pm *partMetaMembers) putNormal(m agent.Object) bool {
	put := func(k string, v any) bool {
		n, ok := normalValue(v)
		if ok {
			m[k] = n
		}
		return ok
	}
	if pm.hasLoc {
		m["locations"] = pm.locations
	}
	return (pm.desc == "" || put("description", pm.desc)) &&
		(!pm.hasDiffs || put("diffs", pm.diffs)) &&
		(len(pm.terminals) == 0 || put("terminals", pm.terminals))
}

// sameOver reports whether o, an object announcedMeta made over base,
// is the one these members make over base: the same members, the text
// of the locations the same, the converted diffs the very ones (the
// per-tool cache of diffsValue), the description and terminal ids equal,
// and base's other members. It is false whenever it cannot tell, and the
// object is made again.
func (pm *partMetaMembers) sameOver(o agent.Object, baseKeys int) bool {
	n := 0
	if pm.hasLoc {
		loc, ok := o["locations"].(json.RawMessage)
		if !ok || !bytes.Equal(loc, pm.locations) {
			return false
		}
		n++
	}
	if pm.desc != "" {
		if s, ok := o["description"].(string); !ok || s != pm.desc {
			return false
		}
		n++
	}
	if pm.hasDiffs {
		df, ok := pm.diffs.(normalized)
		if !ok || !sameShared(o["diffs"], df.v) {
			return false
		}
		n++
	}
	if len(pm.terminals) > 0 {
		ids, ok := o["terminals"].([]any)
		if !ok || len(ids) != len(pm.terminals) {
			return false
		}
		for i, id := range pm.terminals {
			if s, ok := ids[i].(string); !ok || s != id {
				return false
			}
		}
		n++
	}
	return len(o) == n+baseKeys
}

// sameShared reports whether a metadata value is v, a converted list a
// per-tool cache shares: the same elements of the same array.
func sameShared(a, v any) bool {
	x, ok1 := a.([]any)
	y, ok2 := v.([]any)
	return ok1 && ok2 && len(x) > 0 && sameSlice(x, y)
}

// buildPartMeta is partMeta, built from its members.
func (d *Decoder) buildPartMeta(pm partMetaMembers) agent.Object {
	// Most tools' parts have no metadata before their locations or
	// content come: no map is made for nothing.
	n := pm.count()
	if n == 0 {
		return nil
	}
	// The locations are their JSON text, set once the rest is made (a
	// conversion, normalize or toObject, would parse them).
	m := make(map[string]any, n)
	if pm.desc != "" {
		m["description"] = pm.desc
	}
	if pm.hasDiffs {
		m["diffs"] = pm.diffs
	}
	if len(pm.terminals) > 0 {
		m["terminals"] = pm.terminals
	}
	if !pm.hasLoc {
		return d.object(m)
	}
	return withOpaque(d.object(m), "locations", pm.locations)
}

// text renders the tool's content blocks (text, images as Markdown).
func (tl *tool) text() string {
	var parts []string
	for _, c := range tl.content {
		if c.Type == "content" && c.Block.Type != "image" {
			if s := c.Block.markdown(); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func (tl *tool) diffs() []agent.FileDiff {
	var out []agent.FileDiff
	for _, c := range tl.content {
		if c.Type == "diff" {
			out = append(out, fileDiff(c.Path, c.OldText, c.NewText))
		}
	}
	return append(out, tl.writes...)
}

func (tl *tool) terminalIDs() []string {
	var out []string
	for _, c := range tl.content {
		if c.Type == "terminal" {
			out = append(out, c.TerminalID)
		}
	}
	return out
}

// announce emits the tool's ToolCall when what it says changed. A settled
// tool's announcement does not change any more. For a tool that finishes
// with this update (finishing), only its name, title and input count: its
// metadata goes with the result.
func (d *Decoder) announce(tl *tool, finishing bool) {
	d.announceTool(tl, finishing)
}

// announceTool is announce; it returns the tool's canonical name and
// input when it computed them (ok: the tool is not settled).
func (d *Decoder) announceTool(tl *tool, finishing bool) (name string, input json.RawMessage, ok bool) {
	if tl.settled {
		return "", nil, false
	}
	if d.general {
		name, input, cmeta, _ := d.canonicalOf(tl)
		// The reference: the part's object made, merged with the
		// canonical metadata, and compared as JSON with the last.
		pm := d.buildPartMeta(d.partMetaParts(tl))
		meta := make(agent.Object, len(cmeta)+len(pm))
		maps.Copy(meta, cmeta)
		maps.Copy(meta, pm)
		ev := &agent.ToolCall{CallID: tl.callID, Tool: name, Title: tl.title, Input: input, Metadata: meta}
		if d.repeats(&tl.ann, ev, false) || (finishing && d.repeats(&tl.ann, ev, true)) {
			return name, input, true
		}
		d.remember(&tl.ann, ev)
		d.emit(ev)
		return name, input, true
	}
	name, input, cgen := d.canonicalDeferred(tl)
	meta, pgen := d.announcedMeta(tl, cgen)
	gens := [2]uint64{cgen, pgen}
	if cgen != 0 && tl.annGens == gens {
		// Built from what the last announcement was built from: it
		// repeats it.
		return name, input, true
	}
	if repeatsParts(&tl.ann, name, tl.title, input, nil, meta, finishing) {
		return name, input, true
	}
	ev := &agent.ToolCall{CallID: tl.callID, Tool: name, Title: tl.title, Input: input, Metadata: meta}
	d.remember(&tl.ann, ev)
	tl.annGens = gens
	d.emit(ev)
	return name, input, true
}

// advance moves the tool along its status.
func (d *Decoder) advance(tl *tool) {
	switch tl.status {
	case "in_progress":
		if !tl.running && !tl.settled && tl.asking == 0 {
			tl.running = true
			d.emit(&agent.ToolRunning{CallID: tl.callID})
		}
	case "completed", "failed":
		first := !tl.settled
		tl.settled, tl.running = true, false
		meta, files := d.resultMeta(tl)
		if tl.status == "completed" {
			d.emit(&agent.ToolCompleted{CallID: tl.callID, Output: d.output(tl), Metadata: meta, Files: files})
		} else {
			msg := d.output(tl)
			if msg == "" {
				msg = "tool failed"
			}
			d.emit(&agent.ToolFailed{CallID: tl.callID, Error: msg, Metadata: meta})
		}
		if first {
			d.stepResult = true
		}
	}
}

// output is what a finished tool printed: its text content, the output of
// the terminals it embeds (as happy last reported it to the agent), else a
// raw output that is a string.
func (d *Decoder) output(tl *tool) string {
	var parts []string
	if s := tl.text(); s != "" && tl.outContent {
		parts = append(parts, s)
	}
	for _, id := range tl.terminalIDs() {
		if ti := d.terminals.Get(id); ti != nil && ti.output != "" {
			parts = append(parts, ti.output)
		}
	}
	if len(parts) == 0 && !isNull(tl.rawOutput) {
		return rawOutputText(tl.rawOutput)
	}
	return strings.Join(parts, "\n")
}

// resultMeta is the state metadata of a finished tool: its raw output,
// diffs, terminal exit statuses; images and binary (blob) resources of its
// content become attachments (text resources are in its output).
func (d *Decoder) resultMeta(tl *tool) (agent.Object, []agent.PromptFile) {
	// m is made at its first member: a result with none but its raw
	// output (most) makes the one map withOpaque makes.
	var m map[string]any
	var rawOut json.RawMessage
	if !isNull(tl.rawOutput) {
		if rv, ok := opaque(tl.rawOutput); ok {
			rawOut = rv
		} else {
			m = map[string]any{"rawOutput": tl.rawOutput}
		}
	}
	if v, ok := d.diffsValue(tl); ok {
		if m == nil {
			m = map[string]any{}
		}
		m["diffs"] = v
	}
	var terms []any
	for _, id := range tl.terminalIDs() {
		t := map[string]any{"terminalId": id}
		if ti := d.terminals.Get(id); ti != nil && ti.known {
			if ti.exitCode != nil {
				t["exitCode"] = *ti.exitCode
			}
			if ti.signal != nil {
				t["signal"] = *ti.signal
			}
			if ti.truncated {
				t["truncated"] = true
			}
		}
		terms = append(terms, t)
	}
	if len(terms) > 0 {
		if m == nil {
			m = map[string]any{}
		}
		m["terminals"] = terms
	}
	var files []agent.PromptFile
	for _, c := range tl.content {
		if c.Type == "content" && (c.Block.Type == "image" || c.Block.Type == "resource" && c.Block.Blob) {
			if f, ok := c.Block.promptFile(); ok {
				files = append(files, f)
			}
		}
	}
	if len(m) == 0 {
		return withOpaque(nil, "rawOutput", rawOut), files
	}
	return withOpaque(d.object(m), "rawOutput", rawOut), files
}

// permission decodes session/request_permission: the tool part is created
// or updated from params.toolCall and blocked on a permission whose
// options are kept for the answer.
func (d *Decoder) permission(m jsonrpc.Message, key string) {
	const kind = "session/request_permission"
	p, ok := members(m.Params)
	if !ok {
		d.drop(kind, agent.DropInvalidField, "params is not an object", m.Raw)
		return
	}
	// A session id written plainly is looked up as it lies in the frame.
	if b, plain := d.plainStr(p.get("sessionId")); !plain || !d.sessions.GetBytes(b) {
		sid, ok := str(p.get("sessionId"))
		if !ok || !d.sessions.Get(sid) {
			d.drop(kind, agent.DropOrphan, "permission for a session never opened", m.Raw)
			return
		}
	}
	tc, ok := members(p.get("toolCall"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "toolCall is not an object", m.Raw)
		return
	}
	var id string
	if b, plain := d.plainStr(tc.get("toolCallId")); plain && len(b) > 0 {
		if tl := d.tools.GetBytes(b); tl != nil {
			id = tl.acpID // a tool of the turn's: its id string is kept
		}
	}
	if id == "" {
		if id, ok = str(tc.get("toolCallId")); !ok || id == "" {
			d.drop(kind, agent.DropMissingID, "toolCall without toolCallId", m.Raw)
			return
		}
	}
	var buf [8]json.RawMessage
	rawOpts, ok := d.array(buf[:0], p.get("options"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "options is not an array", m.Raw)
		return
	}
	opts, same := d.sameOptions(rawOpts)
	for _, ro := range rawOpts {
		if same {
			break // the options converted last time
		}
		om, ok := members(ro)
		oid, ok1 := str(om.get("optionId"))
		name, ok2 := str(om.get("name"))
		k, ok3 := str(om.get("kind"))
		if !ok || !ok1 || !ok2 || !ok3 {
			d.drop(kind, agent.DropInvalidField, "option needs optionId, name and kind strings", m.Raw)
			return
		}
		opts = append(opts, PermissionOption{OptionID: oid, Name: name, Kind: k})
	}
	tl, created := d.toolFor(id)
	if created {
		tl.kind = "other"
		tl.status = "pending"
		d.beginOutput()
	}
	status, input, locs := tl.status, tl.rawInput, tl.locations
	before := fieldsOf(tl)
	d.mergeFields(kind, tl, &tc) // the change counted below, once restored

	// The request describes the call it asks about; it neither moves the
	// tool (its status) nor takes back what the agent announced: input
	// members and locations it leaves out stay (OpenCode asks with only
	// the command of a call announced with its description and cwd). When
	// it carries an input of its own, that is also the permission's detail
	// (OpenCode sends a diff there), kept in the block's metadata.
	tl.status = status
	var permInput json.RawMessage
	if m, ok := members(input); ok && m.n > 0 && string(tl.rawInput) != string(input) {
		permInput, tl.rawInput = tl.rawInput, input
	}
	if len(tl.locations) == 0 {
		tl.locations = locs
	}
	tl.changedSince(&before)
	// What the announcement computed is what canonical gives below: the
	// tool does not change in between.
	name, input, known := d.announceTool(tl, false)
	tl.perms++
	permID := ""
	if tl.perms > 1 {
		permID = tl.callID + "#permission-" + strconv.Itoa(int(tl.perms))
	}
	patterns := tl.patterns()
	meta := map[string]any{}
	if tl.title != "" {
		meta["title"] = tl.title
	}
	if desc := tl.text(); desc != "" {
		meta["description"] = desc
	}
	var rawIn json.RawMessage
	if permInput != nil {
		if rv, ok := opaque(permInput); ok {
			rawIn = rv
		} else {
			meta["rawInput"] = permInput
		}
	}
	if !known {
		name, input, _ = d.canonicalDeferred(tl) // the metadata is not used: not made
	}
	if p, ok := d.toolPatterns(name, input); ok {
		patterns = p
		if name == agent.ToolRead || name == agent.ToolWrite || name == agent.ToolEdit {
			// Every file the tool touches (a move has two): a deny rule
			// must catch each of them.
			for _, l := range tl.locations {
				if !slices.Contains(patterns, l.Path) {
					patterns = append(patterns, l.Path)
				}
			}
		}
	}
	d.emit(&agent.ToolBlocked{CallID: tl.callID, Tool: name, Input: input,
		Permission: &agent.PermissionRequest{ID: permID, Permission: name,
			Patterns: patterns, Always: slices.Clone(patterns), Metadata: withOpaque(withOpaque(d.object(meta), "rawInput", rawIn), "options", d.optionsValue(opts))}})
	d.theirs.Put(key, agentRequest{method: kind, callID: tl.callID, options: opts})
	tl.asking++
}

// patterns is what a permission for the tool covers, for rules to match:
// the command of an execute tool, the paths of a file tool, else the title.
func (tl *tool) patterns() []string {
	in, _ := members(tl.rawInput)
	if tl.kind == "execute" {
		if c, ok := str(in.get("command")); ok && c != "" {
			return []string{c}
		}
	}
	var out []string
	for _, l := range tl.locations {
		out = append(out, l.Path)
	}
	if len(out) == 0 {
		for _, k := range []string{"path", "file_path", "filePath", "abs_path"} {
			if s, ok := str(in.get(k)); ok && s != "" {
				out = append(out, s)
				break
			}
		}
	}
	if len(out) == 0 && tl.title != "" {
		out = append(out, tl.title)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// plan maps the agent's plan to the todo list.
func (d *Decoder) plan(kind string, u *obj, raw []byte) {
	var buf [16]json.RawMessage
	entries, ok := d.array(buf[:0], u.get("entries"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "entries is not an array", raw)
		return
	}
	todos := make([]agent.Todo, 0, len(entries))
	for _, e := range entries {
		m, ok := members(e)
		content, ok1 := str(m.get("content"))
		status, ok2 := str(m.get("status"))
		prio, ok3 := str(m.get("priority"))
		if !ok || !ok1 || !ok2 || !ok3 {
			d.drop(kind, agent.DropInvalidField, "plan entry needs content, status and priority strings", raw)
			return
		}
		t := agent.Todo{Content: content}
		switch status {
		case "pending":
			t.Status = agent.TodoPending
		case "in_progress":
			t.Status = agent.TodoInProgress
		case "completed":
			t.Status = agent.TodoCompleted
		default:
			d.drop(kind, agent.DropInvalidField, "unknown plan entry status "+strconv.Quote(status), raw)
			return
		}
		switch prio {
		case "high":
			t.Priority = agent.PriorityHigh
		case "medium":
			t.Priority = agent.PriorityMedium
		case "low":
			t.Priority = agent.PriorityLow
		default:
			d.drop(kind, agent.DropInvalidField, "unknown plan entry priority "+strconv.Quote(prio), raw)
			return
		}
		todos = append(todos, t)
	}
	d.emit(&agent.TodosUpdated{Todos: todos})
}

// usage maps usage_update: the tokens in context become the input tokens
// of the current step (what its model call read); the cost is the increase
// of the session's cumulative cost during the step (USD only: the
// transcript's cost has no currency). size has no place in the transcript.
// A report that comes before the turn has assistant output is held until
// it has.
func (d *Decoder) usage(kind string, u *obj, raw []byte) {
	used, ok := d.int64Of(u.get("used"))
	if !ok || used < 0 || isNull(u.get("size")) {
		d.drop(kind, agent.DropInvalidField, "usage_update needs used and size token counts", raw)
		return
	}
	ev := &agent.Usage{Tokens: &agent.Tokens{Input: &used}}
	if c, ok := members(u.get("cost")); ok {
		var amount float64
		cur, _ := str(c.get("currency"))
		if json.Unmarshal(c.get("amount"), &amount) == nil && !isNull(c.get("amount")) && cur == "USD" {
			base := d.stepCost
			if amount < base {
				base = 0 // the agent restarted its count
			}
			step := amount - base
			ev.Cost = &step
			d.lastCost = &amount
		}
	}
	if d.turn == nil && d.anyStep {
		d.emit(ev)
		return
	}
	d.heldUsage = ev
	d.flushUsage(false)
}

// endLoad ends a session/load's history replay.
func (d *Decoder) endLoad() {
	d.loading, d.skipping = false, false
	if d.replay != nil {
		d.replay.key = ""
	}
}

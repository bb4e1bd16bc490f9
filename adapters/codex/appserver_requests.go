package codex

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// request maps a Codex → happy request (approvals, questions).
// requestParams are the members of Codex's requests the decoder reads.
type requestParams struct {
	scoped
	CallID      string          `json:"callId"`
	Command     json.RawMessage `json:"command"`
	Cwd         string          `json:"cwd"`
	Reason      *string         `json:"reason"`
	Actions     json.RawMessage `json:"commandActions"`
	Available   json.RawMessage `json:"availableDecisions"`
	Amendment   json.RawMessage `json:"proposedExecpolicyAmendment"`
	GrantRoot   *string         `json:"grantRoot"`
	FileChanges map[string]any  `json:"fileChanges"`
	Conv        string          `json:"conversationId"`
	Questions   []struct {
		ID       string `json:"id"`
		Header   string `json:"header"`
		Question string `json:"question"`
		IsOther  bool   `json:"isOther"`
		Options  []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
}

// serverRequest is one request of Codex's, for its handler.
type serverRequest struct {
	o    *out
	m    jsonrpc.Message
	p    requestParams
	key  string // its id, as a map key
	th   *thread
	base agent.EventBase
	meta agent.Object
}

func (d *AppServerDecoder) request(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	var p requestParams
	if len(m.Params) == 0 || m.Params[0] != '{' || json.Unmarshal(m.Params, &p) != nil {
		d.drop(o, m.Method, agent.DropInvalidField, "request params are not an object of the expected shape", m.Raw)
		return
	}
	if r := d.received[key]; r != nil && !r.answered {
		// A second request under the id of one still waiting: keep the
		// first (its answer is matched by id), refuse this one.
		d.drop(o, m.Method, agent.DropInvalidField, "request id "+key+" is already pending", m.Raw)
		return
	}
	threadID := p.ThreadID
	if threadID == "" {
		threadID = p.Conv
	}
	th := d.threadOf(threadID)
	if th == nil && threadID != "" && d.threads[d.main] != nil {
		// A thread never announced (its thread/started lost, or a
		// sub-agent Codex did not tell of): its request is its own, in a
		// child session of its own, never a tool of the main thread's
		// (whose call ids it could shadow).
		th = d.child(o, d.threads[d.main], threadID, "", "", "codex", "")
	}
	if th == nil {
		th = d.threads[d.main]
	}
	if th == nil {
		d.drop(o, m.Method, agent.DropOrphan, "request for an unknown thread", m.Raw)
		return
	}
	base := agent.EventBase{Session: th.session}
	meta := agent.Object{}
	if p.Reason != nil && *p.Reason != "" {
		meta["reason"] = *p.Reason
	}
	r := serverRequest{o: o, m: m, p: p, key: key, th: th, base: base, meta: meta}
	switch m.Method {
	case "item/commandExecution/requestApproval", "execCommandApproval":
		d.commandApproval(r)
	case "item/fileChange/requestApproval", "applyPatchApproval":
		d.fileApproval(r)
	case "item/tool/requestUserInput":
		d.question(r)
	case "mcpServer/elicitation/request", "item/permissions/requestApproval", "item/tool/call",
		"account/chatgptAuthTokens/refresh", "attestation/generate":
		// Known, and refused by the live client with a JSON-RPC error.
		d.receive(key, &srvReq{method: m.Method, session: th.session})
	default:
		d.drop(o, m.Method, agent.DropUnknownType, "server request unknown to this version", m.Raw)
	}
}

// commandApproval blocks a command on its approval request.
func (d *AppServerDecoder) commandApproval(r serverRequest) {
	callID := r.p.ItemID
	if r.m.Method == "execCommandApproval" {
		callID = r.p.CallID
	}
	cmd, wrapped := appServerCommand(r.p.Command, r.p.Actions)
	if callID == "" {
		d.drop(r.o, r.m.Method, agent.DropMissingID, "approval request without item/call id", r.m.Raw)
		return
	}
	if r.p.Cwd != "" {
		r.meta["cwd"] = r.p.Cwd
	}
	for k, v := range map[string]json.RawMessage{"commandActions": r.p.Actions, "availableDecisions": r.p.Available, "proposedExecpolicyAmendment": r.p.Amendment} {
		if len(v) > 0 && string(v) != "null" {
			r.meta[k] = v
		}
	}
	if wrapped != "" {
		r.meta["rawCommand"] = wrapped
	}
	var patterns []string
	if cmd != "" {
		patterns = []string{cmd}
	}
	c := d.callFor(r.th, callID)
	if c.tool == "" {
		c.tool = agent.ToolBash
	}
	if !c.shown && !c.done {
		input, tmeta := shellCall("commandExecution", cmd, wrapped, r.p.Cwd)
		d.announce(r.o, c, r.base, cmd, input, tmeta)
	}
	d.block(r.o, c, r.base, r.key, r.m.Method, nil, &agent.PermissionRequest{Permission: agent.ToolBash, Patterns: patterns, Always: patterns, Metadata: r.meta})
}

// fileApproval blocks a file change on its approval request.
func (d *AppServerDecoder) fileApproval(r serverRequest) {
	callID := r.p.ItemID
	if r.m.Method == "applyPatchApproval" {
		callID = r.p.CallID
	}
	if callID == "" {
		d.drop(r.o, r.m.Method, agent.DropMissingID, "approval request without item/call id", r.m.Raw)
		return
	}
	if r.p.GrantRoot != nil && *r.p.GrantRoot != "" {
		r.meta["grantRoot"] = *r.p.GrantRoot
	}
	c := d.callFor(r.th, callID)
	if c.tool == "" {
		c.tool = agent.ToolEdit
	}
	paths := c.paths
	if len(r.p.FileChanges) > 0 {
		paths = paths[:0:0]
		for k := range r.p.FileChanges {
			paths = append(paths, k)
		}
		sort.Strings(paths)
		r.meta["fileChanges"] = r.p.FileChanges
	}
	if !c.shown && !c.done {
		in := agent.EditInput{}
		if len(paths) > 0 {
			in.Path = paths[0]
		}
		input := agent.EncodeInput(in)
		var raw json.RawMessage
		if len(paths) > 0 {
			raw = mustObject(map[string]any{"paths": paths})
		}
		d.announce(r.o, c, r.base, strings.Join(paths, ", "), input, agent.ToolMetadata("fileChange", raw, input))
	}
	d.block(r.o, c, r.base, r.key, r.m.Method, nil, &agent.PermissionRequest{Permission: c.tool, Patterns: paths, Always: paths, Metadata: r.meta})
}

// question blocks a tool on Codex's questions.
func (d *AppServerDecoder) question(r serverRequest) {
	if r.p.ItemID == "" || len(r.p.Questions) == 0 {
		d.drop(r.o, r.m.Method, agent.DropInvalidField, "question request without itemId or questions", r.m.Raw)
		return
	}
	c := d.callFor(r.th, r.p.ItemID)
	if c.tool == "" {
		c.tool = agent.ToolQuestion
	}
	q := &agent.QuestionRequest{}
	var qids []string
	for _, x := range r.p.Questions {
		info := agent.QuestionInfo{Question: x.Question, Header: x.Header, Options: []agent.QuestionOption{}}
		for _, op := range x.Options {
			info.Options = append(info.Options, agent.QuestionOption{Label: op.Label, Description: op.Description})
		}
		custom := x.IsOther || len(x.Options) == 0
		info.Custom = &custom
		q.Questions = append(q.Questions, info)
		qids = append(qids, x.ID)
	}
	d.receive(r.key, &srvReq{method: r.m.Method, session: r.th.session, callID: r.p.ItemID, qids: qids})
	c.blocked = true
	var input json.RawMessage
	if !c.shown {
		input = agent.EncodeInput(agent.QuestionInput{Questions: q.Questions})
	}
	r.o.add(&agent.ToolBlocked{EventBase: r.base, CallID: r.p.ItemID, Tool: c.tool, Input: input, Question: q})
}

func (d *AppServerDecoder) block(o *out, c *call, base agent.EventBase, key, method string, input json.RawMessage, perm *agent.PermissionRequest) {
	d.receive(key, &srvReq{method: method, session: c.session, callID: c.id})
	if c.done {
		return
	}
	c.blocked = true
	if c.shown {
		input = nil
	}
	o.add(&agent.ToolBlocked{EventBase: base, CallID: c.id, Tool: c.tool, Input: input, Permission: perm})
}

// appServerCommand is the command of an app-server commandExecution item
// or approval request as a person types it (see UserCommand), and the
// wrapped one Codex gave ("" when the same). Without a command, the
// commands of its commandActions (Codex's parse of it, for display) stand
// in, joined by " && ".
func appServerCommand(command, actions json.RawMessage) (cmd, wrapped string) {
	if cmd, wrapped = UserCommand(command); cmd != "" {
		return cmd, wrapped
	}
	return actionsCommand(actions), ""
}

// actionsCommand is the commands of Codex's parsed commandActions joined
// with " && " ("" when there are none).
func actionsCommand(actions json.RawMessage) string {
	var acts []struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(actions, &acts)
	var parts []string
	for _, a := range acts {
		if a.Command != "" {
			parts = append(parts, a.Command)
		}
	}
	return strings.Join(parts, " && ")
}

// shellJoin quotes argv the way a POSIX shell would read it back.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '/' || r == '-' || r == '_' || r == '.' || r == '=' || r == ':' || r == ',' ||
				(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'"'"'`) + "'"
	}
	return strings.Join(out, " ")
}

// c2a maps happy's own frames: the requests it sent (remembered, to read
// their responses) and its answers to Codex's requests.
func (d *AppServerDecoder) c2a(o *out, f jsonrpc.Frame) {
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, "own frame: "+detail, f.Data)
		return
	}
	m := f.Msg
	switch m.Kind {
	case jsonrpc.KindRequest:
		var p struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		d.sent[idString(mustObject(m.ID))] = sentReq{method: m.Method, thread: p.ThreadID}
	case jsonrpc.KindResponse:
		key := idString(mustObject(m.ID))
		r := d.received[key]
		if r == nil || r.answered {
			return
		}
		r.answered = true
		if r.callID == "" {
			return
		}
		c := d.calls[r.session+"\x00"+r.callID]
		base := agent.EventBase{Session: r.session}
		if m.Error != nil {
			if c != nil {
				c.blocked = false
			}
			o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
			return
		}
		if r.method == "item/tool/requestUserInput" {
			var res struct {
				Answers map[string]struct {
					Answers []string `json:"answers"`
				} `json:"answers"`
			}
			_ = json.Unmarshal(m.Result, &res)
			answers := make([][]string, len(r.qids))
			for i, q := range r.qids {
				answers[i] = append([]string{}, res.Answers[q].Answers...)
			}
			if c != nil {
				c.blocked = false
			}
			o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Answers: answers})
			return
		}
		var res struct {
			Decision json.RawMessage `json:"decision"`
		}
		_ = json.Unmarshal(m.Result, &res)
		answer := res.Decision
		dec, reason, ok := decision(answer)
		if !ok {
			r.answered = false
			d.drop(o, "decision", agent.DropUnknownDecision, "answer "+string(answer)+" is not a known decision", f.Data)
			return
		}
		if c != nil {
			c.blocked = false
			c.running = dec != agent.DecisionReject
		}
		o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Decision: dec, Reason: reason})
	}
}

// response maps Codex's responses to happy's requests.
func (d *AppServerDecoder) response(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	s, ok := d.sent[key]
	if !ok {
		return // a request this decoder did not see (the log started later)
	}
	delete(d.sent, key)
	if m.Error != nil {
		switch s.method {
		case "turn/start", "thread/start", "thread/resume":
			o.add(&agent.AgentError{Kind: agent.ErrorProtocol, Text: s.method + " failed: " + m.Error.Message})
		}
		return
	}
	switch s.method {
	case "thread/start", "thread/resume", "thread/fork":
		var r threadResult
		if json.Unmarshal(m.Result, &r) != nil || r.Thread.ID == "" {
			d.drop(o, s.method, agent.DropMissingID, "response without thread.id", m.Raw)
			return
		}
		if r.Thread.Model == "" {
			r.Thread.Model = r.Model
		}
		if r.Thread.ModelProvider == "" {
			r.Thread.ModelProvider = r.ModelProvider
		}
		if r.Thread.Cwd == "" {
			r.Thread.Cwd = r.Cwd
		}
		r.Thread.ParentThread = nil
		if d.main == "" {
			d.main = r.Thread.ID
			d.threads[r.Thread.ID] = newThread("")
		}
		d.threadStarted(o, r.Thread)
	case "turn/start":
		var r turnParams
		if json.Unmarshal(m.Result, &r) == nil && r.Turn.ID != "" {
			if th := d.threadOf(s.thread); th != nil && (!th.open || th.turn != r.Turn.ID) && !(th.turn == r.Turn.ID) {
				d.startTurn(o, th, r.Turn.ID)
			}
		}
	case "thread/read":
		// Reconciliation: a turn that ended without turn/completed.
		var r struct {
			Thread threadInfo `json:"thread"`
		}
		if json.Unmarshal(m.Result, &r) != nil {
			d.drop(o, s.method, agent.DropInvalidField, "thread/read result without thread", m.Raw)
			return
		}
		th := d.threads[r.Thread.ID]
		if th == nil || !th.open {
			return
		}
		for _, t := range r.Thread.Turns {
			if t.ID == th.turn && t.Status != "inProgress" {
				d.settleTurn(o, th, t, m.Raw)
			}
		}
	}
}

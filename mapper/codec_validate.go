package mapper

// Semantic checks on Go values, shared by the encoder (which refuses to
// write what the decoder would refuse to read) and the decoder (which runs
// them after the JSON-level checks). Errors are *FieldError with a path
// relative to the value checked.

import (
	"math"

	"github.com/happy-dev/happy/agent"
)

// Validate checks that the state is possible for its status (seed 001 tool
// state shapes, with the blocked semantics of docs/ARCHITECTURE.md):
//
//   - pending carries no block, title, output, error, metadata, time or
//     attachments (only input and raw);
//   - running may carry a resolved block (the answer that let it run:
//     decision once/always, or a question's answers), nothing terminal;
//   - blocked carries exactly one unresolved block;
//   - completed carries no error, and a resolved block only if it was not
//     rejected;
//   - error carries no output, title or attachments, and any resolved block.
//
// A field set on a status that has no place for it is refused rather than
// silently dropped by the encoder. The error is a *FieldError.
func (s ToolState) Validate() error {
	st := s.Status
	if _, err := parseToolStatus(string(st)); err != nil {
		return &FieldError{Path: "status", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	not := func(field string, set bool) error {
		if set {
			return invalid(field, "a %s tool state has no %s", st, field)
		}
		return nil
	}
	checks := []error{}
	switch st {
	case StatusPending:
		checks = append(checks,
			not("title", s.Title != ""), not("output", s.Output != ""), not("error", s.Error != ""),
			not("metadata", s.Metadata != nil), not("time", s.Time != ToolTime{}),
			not("attachments", s.Attachments != nil), not("block", s.Block != nil))
	case StatusRunning, StatusBlocked:
		checks = append(checks,
			not("raw", s.Raw != ""), not("output", s.Output != ""), not("error", s.Error != ""),
			not("time.end", s.Time.End != 0), not("time.compacted", s.Time.Compacted != nil),
			not("attachments", s.Attachments != nil))
	case StatusCompleted:
		checks = append(checks, not("raw", s.Raw != ""), not("error", s.Error != ""))
	case StatusError:
		checks = append(checks,
			not("raw", s.Raw != ""), not("output", s.Output != ""), not("title", s.Title != ""),
			not("time.compacted", s.Time.Compacted != nil), not("attachments", s.Attachments != nil))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if s.Block != nil {
		if err := s.Block.Validate(); err != nil {
			return at("block", err)
		}
	}
	switch st {
	case StatusBlocked:
		if s.Block == nil || s.Block.Resolved() {
			return invalid("block", "blocked tool needs an unresolved block")
		}
	case StatusRunning, StatusCompleted:
		if s.Block != nil {
			if !s.Block.Resolved() {
				return invalid("block", "a %s tool cannot carry an unresolved block", st)
			}
			if s.Block.Decision == agent.DecisionReject {
				return invalid("block.decision", "a %s tool cannot carry a rejected block", st)
			}
		}
	case StatusError:
		if s.Block != nil && !s.Block.Resolved() {
			return invalid("block", "an error tool cannot carry an unresolved block")
		}
	}
	for i := range s.Attachments {
		if err := validatePart(&s.Attachments[i]); err != nil {
			return at(joinPath("attachments", indexPath(i)), err)
		}
	}
	return nil
}

// Validate checks a block's shape for its type and resolution (see Block).
// The error is a *FieldError.
func (b *Block) Validate() error {
	if _, err := parseBlockType(string(b.Type)); err != nil {
		return &FieldError{Path: "type", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	if b.ID == "" {
		return &FieldError{Path: "id", Reason: agent.DropMissingID, Msg: "block id is empty"}
	}
	resolved := b.DecidedAt != nil
	if !resolved {
		switch {
		case b.Decision != "":
			return invalid("decision", "an unresolved block has no decision (decidedAt is missing)")
		case b.Answers != nil:
			return invalid("answers", "an unresolved block has no answers (decidedAt is missing)")
		case b.Reason != "":
			return invalid("reason", "an unresolved block has no reason (decidedAt is missing)")
		case b.Rule != nil:
			return invalid("rule", "an unresolved block has no rule (decidedAt is missing)")
		}
	}
	switch b.Type {
	case BlockPermission:
		switch {
		case b.Permission == "":
			return invalid("permission", "permission block needs a permission")
		case b.Questions != nil:
			return invalid("questions", "a permission block has no questions")
		case b.Answers != nil:
			return invalid("answers", "a permission block has no answers")
		}
		if resolved {
			if _, err := agent.ParseDecision(string(b.Decision)); err != nil {
				return &FieldError{Path: "decision", Reason: agent.DropUnknownDecision, Msg: err.Error(), Err: err}
			}
		}
		if r := b.Rule; r != nil {
			if err := validateRule(*r); err != nil {
				return at("rule", err)
			}
			switch {
			case b.Reason != agent.ReasonRule:
				return invalid("reason", "a block a rule resolved has reason %q, not %q", agent.ReasonRule, b.Reason)
			case r.Action == ActionAllow && b.Decision != agent.DecisionReject:
			case r.Action == ActionDeny && b.Decision == agent.DecisionReject:
			default:
				return invalid("rule.action", "rule action %q does not give decision %q", r.Action, b.Decision)
			}
		}
	case BlockQuestion:
		switch {
		case b.Rule != nil:
			return invalid("rule", "a question block has no rule")
		case b.Permission != "":
			return invalid("permission", "a question block has no permission")
		case b.Patterns != nil:
			return invalid("patterns", "a question block has no patterns")
		case b.Always != nil:
			return invalid("always", "a question block has no always patterns")
		case b.Metadata != nil:
			return invalid("metadata", "a question block has no metadata")
		case len(b.Questions) == 0:
			return invalid("questions", "question block needs at least one question")
		}
		for i, q := range b.Questions {
			p := joinPath("questions", indexPath(i))
			if q.Question == "" {
				return invalid(joinPath(p, "question"), "question text is empty")
			}
			for j, o := range q.Options {
				if o.Label == "" {
					return invalid(joinPath(p, joinPath("options", indexPath(j))+".label"), "option label is empty")
				}
			}
		}
		if resolved {
			switch b.Decision {
			case "":
				if len(b.Answers) != len(b.Questions) {
					return invalid("answers", "%d answers for %d questions", len(b.Answers), len(b.Questions))
				}
			case agent.DecisionReject:
				if len(b.Answers) != 0 {
					return invalid("answers", "a rejected question has no answers")
				}
			default:
				if _, err := agent.ParseDecision(string(b.Decision)); err != nil {
					return &FieldError{Path: "decision", Reason: agent.DropUnknownDecision, Msg: err.Error(), Err: err}
				}
				return invalid("decision", "a question is answered or rejected, not %q", b.Decision)
			}
		}
	}
	return nil
}

func indexPath(i int) string { return "[" + itoa(i) + "]" }

func itoa(i int) string {
	var e encoder
	e.int(int64(i))
	return string(e.buf)
}

func validateBase(b *PartBase) error {
	switch {
	case b.ID == "":
		return &FieldError{Path: "id", Reason: agent.DropMissingID, Msg: "part id is empty"}
	case b.SessionID == "":
		return &FieldError{Path: "sessionID", Reason: agent.DropMissingID, Msg: "part sessionID is empty"}
	case b.MessageID == "":
		return &FieldError{Path: "messageID", Reason: agent.DropMissingID, Msg: "part messageID is empty"}
	}
	return nil
}

func validateTokens(t *agent.Tokens) error {
	for _, f := range []struct {
		name string
		v    *int64
	}{{"input", t.Input}, {"output", t.Output}, {"reasoning", t.Reasoning}, {"cache.read", t.Cache.Read}, {"cache.write", t.Cache.Write}} {
		if f.v != nil && *f.v < 0 {
			return invalid(f.name, "token count %d is negative", *f.v)
		}
	}
	return nil
}

func validateCost(c *float64) error {
	if c != nil && (*c < 0 || math.IsNaN(*c) || math.IsInf(*c, 0)) {
		return invalid("", "cost %v is not a non-negative number", *c)
	}
	return nil
}

// ValidatePart checks a part: ids present, required fields, its tool state
// (for a ToolPart). An UnknownPart must carry the raw JSON it was read
// from. The error is a *FieldError.
func ValidatePart(p Part) error {
	if p == nil {
		return invalid("", "part is nil")
	}
	return validatePart(p)
}

func validatePart(p Part) error {
	if err := validateBase(p.Base()); err != nil {
		return err
	}
	switch x := p.(type) {
	case *TextPart:
	case *ReasoningPart:
	case *ToolPart:
		if x.CallID == "" {
			return &FieldError{Path: "callID", Reason: agent.DropMissingID, Msg: "tool part callID is empty"}
		}
		if x.Tool == "" {
			return invalid("tool", "tool name is empty")
		}
		return at("state", x.State.Validate())
	case *FilePart:
		if x.Mime == "" {
			return invalid("mime", "file part needs a mime type")
		}
	case *StepStartPart:
	case *StepFinishPart:
		if _, err := parseFinish(x.Reason); err != nil {
			return &FieldError{Path: "reason", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
		}
		if err := validateCost(x.Cost); err != nil {
			return at("cost", err)
		}
		if x.Tokens != nil {
			return at("tokens", validateTokens(x.Tokens))
		}
	case *SubtaskPart:
	case *AgentPart:
	case *SnapshotPart:
	case *PatchPart:
	case *CompactionPart:
	case *RetryPart:
		if x.Attempt < 0 {
			return invalid("attempt", "attempt %d is negative", x.Attempt)
		}
		if x.Error.Name == "" {
			return invalid("error.name", "error name is empty")
		}
	case *UnknownPart:
		if len(x.Raw) == 0 {
			return invalid("", "unknown part %q has no raw JSON to write back", x.Type)
		}
		if x.Type == "" {
			return invalid("type", "part type is empty")
		}
	default:
		return invalid("type", "part type %T is not part of this model", p)
	}
	return nil
}

// ValidateMessage checks a message's envelope: ids, role field, finish
// reason, token counts and cost. The error is a *FieldError.
func ValidateMessage(m Message) error {
	switch x := m.(type) {
	case *UserMessage:
		if x == nil {
			return invalid("", "message is nil")
		}
		if err := validateEnvelope(x.ID, x.SessionID); err != nil {
			return err
		}
		if x.Role != "" && x.Role != RoleUser {
			return invalid("role", "a user message has role %q", x.Role)
		}
	case *AssistantMessage:
		if x == nil {
			return invalid("", "message is nil")
		}
		if err := validateEnvelope(x.ID, x.SessionID); err != nil {
			return err
		}
		if x.Role != "" && x.Role != RoleAssistant {
			return invalid("role", "an assistant message has role %q", x.Role)
		}
		if x.Finish != "" {
			if _, err := parseFinish(x.Finish); err != nil {
				return &FieldError{Path: "finish", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
			}
		}
		if err := validateCost(x.Cost); err != nil {
			return at("cost", err)
		}
		if x.Tokens != nil {
			if err := validateTokens(x.Tokens); err != nil {
				return at("tokens", err)
			}
		}
		if x.Error != nil && x.Error.Name == "" {
			return invalid("error.name", "error name is empty")
		}
	case nil:
		return invalid("", "message is nil")
	default:
		return invalid("role", "message type %T is not part of this model", m)
	}
	return nil
}

func validateEnvelope(id, sessionID string) error {
	if id == "" {
		return &FieldError{Path: "id", Reason: agent.DropMissingID, Msg: "message id is empty"}
	}
	if sessionID == "" {
		return &FieldError{Path: "sessionID", Reason: agent.DropMissingID, Msg: "message sessionID is empty"}
	}
	return nil
}

func validateSession(s *Session) error {
	if s.ID == "" {
		return &FieldError{Path: "id", Reason: agent.DropMissingID, Msg: "session id is empty"}
	}
	for i, r := range s.Permission {
		if err := validateRule(r); err != nil {
			return at(joinPath("permission", indexPath(i)), err)
		}
	}
	return nil
}

func validateRule(r PermissionRule) error {
	if r.Permission == "" {
		return invalid("permission", "rule permission is empty")
	}
	if _, err := ParseAction(string(r.Action)); err != nil {
		return &FieldError{Path: "action", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	return nil
}

func validateTodo(t agent.Todo) error {
	if _, err := agent.ParseTodoStatus(string(t.Status)); err != nil {
		return &FieldError{Path: "status", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	if _, err := agent.ParseTodoPriority(string(t.Priority)); err != nil {
		return &FieldError{Path: "priority", Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	return nil
}

func validateDropped(d agent.Dropped) error {
	switch {
	case d.Source == "":
		return invalid("source", "dropped record needs a source")
	case d.Reason == "":
		return invalid("reason", "dropped record needs a reason")
	case d.Line < 0:
		return invalid("line", "line %d is negative", d.Line)
	}
	return nil
}

package compat

import (
	"encoding/json"
	"fmt"
	"slices"
)

// The validators below are written from the description of what the
// reference app parses (docs/ARCHITECTURE.md, "The reference app"): a record
// the app's schema refuses is dropped silently there, so every legacy record
// and agentState happy writes must pass them.

type obj = map[string]any

func asObj(v any) (obj, bool) { m, ok := v.(map[string]any); return m, ok }

func str(m obj, k string, required bool) error {
	v, ok := m[k]
	if !ok {
		if required {
			return fmt.Errorf("%s missing", k)
		}
		return nil
	}
	if _, ok := v.(string); !ok {
		return fmt.Errorf("%s is %T, not a string", k, v)
	}
	return nil
}

func num(m obj, k string, required bool) error {
	v, ok := m[k]
	if !ok {
		if required {
			return fmt.Errorf("%s missing", k)
		}
		return nil
	}
	if _, ok := v.(float64); !ok {
		return fmt.Errorf("%s is %T, not a number", k, v)
	}
	return nil
}

func oneOf(m obj, k string, required bool, allowed ...string) error {
	if err := str(m, k, required); err != nil {
		return err
	}
	if v, ok := m[k].(string); ok && !slices.Contains(allowed, v) {
		return fmt.Errorf("%s %q not one of %v", k, v, allowed)
	}
	return nil
}

func all(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// validateRecord checks one legacy record against the three shapes the app
// parses (role user, session, agent with an acp content) and, for session
// envelopes, the event union on ev.t.
func validateRecord(raw []byte) error {
	var m obj
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	content, ok := asObj(m["content"])
	if !ok {
		return fmt.Errorf("content is not an object")
	}
	switch m["role"] {
	case "user":
		return all(oneOf(content, "type", true, "text"), str(content, "text", true))
	case "session":
		if err := all(str(content, "id", true), num(content, "time", true), oneOf(content, "role", true, "user", "agent"),
			str(content, "turn", false)); err != nil {
			return err
		}
		if _, ok := content["subagent"]; ok {
			return fmt.Errorf("subagent must be a cuid2; happy never writes one")
		}
		if content["role"] == "agent" && content["turn"] == nil {
			return fmt.Errorf("agent envelope without turn: the app drops it")
		}
		ev, ok := asObj(content["ev"])
		if !ok {
			return fmt.Errorf("ev is not an object")
		}
		switch ev["t"] {
		case "text":
			if t, ok := ev["thinking"]; ok {
				if _, ok := t.(bool); !ok {
					return fmt.Errorf("thinking is not a boolean")
				}
			}
			return str(ev, "text", true)
		case "tool-call-start":
			if _, ok := asObj(ev["args"]); !ok {
				return fmt.Errorf("args is not an object")
			}
			return all(str(ev, "call", true), str(ev, "name", true), str(ev, "title", true), str(ev, "description", true))
		case "turn-start":
			return nil
		case "turn-end":
			return oneOf(ev, "status", true, "completed", "failed", "cancelled")
		}
		return fmt.Errorf("ev.t %v not written by happy", ev["t"])
	case "agent":
		if err := all(oneOf(content, "type", true, "acp"), oneOf(content, "provider", true, "gemini", "codex", "claude", "opencode")); err != nil {
			return err
		}
		data, ok := asObj(content["data"])
		if !ok {
			return fmt.Errorf("data is not an object")
		}
		if _, ok := data["output"]; !ok {
			return fmt.Errorf("output missing")
		}
		if e, ok := data["isError"]; ok {
			if _, ok := e.(bool); !ok {
				return fmt.Errorf("isError is not a boolean")
			}
		}
		return all(oneOf(data, "type", true, "tool-result"), str(data, "callId", true), str(data, "id", true))
	}
	return fmt.Errorf("role %v", m["role"])
}

// validateAgentState checks an agentState against the app's schema:
// requests {tool, arguments, createdAt?}, completedRequests with the status
// and decision enums, communications as forms.
func validateAgentState(raw []byte) error {
	var m obj
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	reqs := func(key string, done bool) error {
		v, ok := m[key]
		if !ok {
			return nil
		}
		rs, ok := asObj(v)
		if !ok {
			return fmt.Errorf("%s is not an object", key)
		}
		for id, r := range rs {
			req, ok := asObj(r)
			if !ok {
				return fmt.Errorf("%s[%s] is not an object", key, id)
			}
			if _, ok := req["arguments"]; !ok {
				return fmt.Errorf("%s[%s] without arguments", key, id)
			}
			err := all(str(req, "tool", true), num(req, "createdAt", false), str(req, "toolUseId", false))
			if err == nil && done {
				err = all(num(req, "completedAt", false), oneOf(req, "status", true, "canceled", "denied", "approved"),
					str(req, "reason", false), oneOf(req, "decision", false, "approved", "approved_for_session", "denied", "abort"))
			}
			if err != nil {
				return fmt.Errorf("%s[%s]: %w", key, id, err)
			}
		}
		return nil
	}
	forms := func(key string, done bool) error {
		v, ok := m[key]
		if !ok {
			return nil
		}
		cs, ok := asObj(v)
		if !ok {
			return fmt.Errorf("%s is not an object", key)
		}
		for id, c := range cs {
			comm, ok := asObj(c)
			if !ok {
				return fmt.Errorf("%s[%s] is not an object", key, id)
			}
			form, ok := asObj(comm["form"])
			if !ok {
				return fmt.Errorf("%s[%s] without a form", key, id)
			}
			qs, ok := form["questions"].([]any)
			if !ok {
				return fmt.Errorf("%s[%s] form without questions", key, id)
			}
			for _, q := range qs {
				qo, ok := asObj(q)
				if !ok {
					return fmt.Errorf("%s[%s] question is not an object", key, id)
				}
				if err := all(str(qo, "id", true), str(qo, "header", true), str(qo, "question", true)); err != nil {
					return fmt.Errorf("%s[%s]: %w", key, id, err)
				}
				if _, ok := qo["options"].([]any); !ok {
					return fmt.Errorf("%s[%s] question without options", key, id)
				}
			}
			err := all(oneOf(comm, "kind", true, "form"), str(comm, "toolUseId", false), str(comm, "title", false))
			if err == nil && done {
				err = all(oneOf(comm, "status", true, "answered", "cancelled"), num(comm, "completedAt", true))
			}
			if err != nil {
				return fmt.Errorf("%s[%s]: %w", key, id, err)
			}
		}
		return nil
	}
	return all(reqs("requests", false), reqs("completedRequests", true), forms("communications", false), forms("completedCommunications", true))
}

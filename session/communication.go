package session

import (
	"sort"
	"strconv"

	"github.com/happy-dev/happy/agent"
)

// MethodCommunication is the reference app's RPC answering a question
// block ("<relaySessionID>:communication").
const MethodCommunication = "communication"

// Communication is a decoded "communication" RPC: the reference app's
// answer to a question (a form), or its cancellation.
type Communication struct {
	CallID    string
	Cancelled bool
	// Answers maps a question id to the labels chosen (options, then the
	// free text when given). A question id is the question's position
	// ("0", "1", …), its text, or its header.
	Answers map[string][]string
}

// DecodeCommunication decodes the params of the "communication" RPC:
//
//	{"id": "<callID>", "kind": "form", "status": "answered"|"cancelled",
//	 "answers"?: {"<qid>": {"options": ["label", …], "custom"?: "text"}}}
//
// Refused (ErrBadControl): a missing id, a kind other than "form", a status
// other than answered or cancelled, an answered form without answers, an
// answer that is not {options: [string], custom?: string}.
func DecodeCommunication(raw []byte) (Communication, error) {
	var p struct {
		ID      *string `json:"id"`
		Kind    *string `json:"kind"`
		Status  *string `json:"status"`
		Answers map[string]struct {
			Options []string `json:"options"`
			Custom  *string  `json:"custom"`
		} `json:"answers"`
	}
	if err := decodeObject(raw, &p); err != nil {
		return Communication{}, err
	}
	if p.ID == nil || *p.ID == "" {
		return Communication{}, refuse("missing id")
	}
	if p.Kind == nil || *p.Kind != "form" {
		return Communication{}, refuse("kind must be \"form\"")
	}
	c := Communication{CallID: *p.ID}
	switch {
	case p.Status == nil:
		return Communication{}, refuse("missing status")
	case *p.Status == "cancelled":
		c.Cancelled = true
		return c, nil
	case *p.Status != "answered":
		return Communication{}, refuse("status %q is not answered or cancelled", *p.Status)
	}
	if len(p.Answers) == 0 {
		return Communication{}, refuse("an answered form needs answers")
	}
	c.Answers = make(map[string][]string, len(p.Answers))
	for qid, a := range p.Answers {
		labels := append([]string{}, a.Options...)
		if a.Custom != nil && *a.Custom != "" {
			labels = append(labels, *a.Custom)
		}
		c.Answers[qid] = labels
	}
	return c, nil
}

// ControlCommunication answers (or cancels: the question is rejected with
// reason "cancelled") a blocked question, the reference app's way.
type ControlCommunication struct {
	Communication Communication
	Reply         chan<- error
}

func (ControlCommunication) isControl() {}

// orderAnswers turns a form's answers into happy's per-question labels,
// in the questions' order. Unknown question ids are refused.
func orderAnswers(qs []agent.QuestionInfo, answers map[string][]string) ([][]string, error) {
	n := len(qs)
	if n == 0 { // the questions are unknown: ids must be positions
		for qid := range answers {
			i, err := strconv.Atoi(qid)
			if err != nil || i < 0 || i >= len(answers) {
				return nil, refuse("question id %q is not a position", qid)
			}
		}
		n = len(answers)
	}
	out := make([][]string, n)
	for i := range out {
		out[i] = []string{}
	}
	ids := make([]string, 0, len(answers))
	for qid := range answers {
		ids = append(ids, qid)
	}
	sort.Strings(ids)
	for _, qid := range ids {
		i := -1
		if k, err := strconv.Atoi(qid); err == nil && k >= 0 && k < n {
			i = k
		}
		for j := 0; i < 0 && j < len(qs); j++ {
			if qs[j].Question == qid || qs[j].Header == qid {
				i = j
			}
		}
		if i < 0 {
			return nil, refuse("no question %q in this form", qid)
		}
		out[i] = answers[qid]
	}
	return out, nil
}

// communicate applies a ControlCommunication on the runner goroutine.
func (r *Runner) communicate(c Communication) error {
	key, p, err := r.waiting(c.CallID, true)
	if err != nil {
		return err
	}
	if c.Cancelled {
		delete(r.pending, key)
		ctx, cancel := r.answerCtx()
		defer cancel()
		// The agent's question is refused like a rejected permission; an
		// agent that cannot take that has it settled at the turn's end.
		if err := r.opts.Agent.Decide(ctx, c.CallID, agent.Verdict{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}); err != nil {
			r.opts.Log.Warn().Err(err).Str("callID", c.CallID).Msg("cancel question")
		}
		r.apply(&agent.ToolResolved{EventBase: r.at(p.session), CallID: c.CallID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
		return nil
	}
	answers, err := orderAnswers(p.questions, c.Answers)
	if err != nil {
		return err
	}
	delete(r.pending, key)
	ctx, cancel := r.answerCtx()
	defer cancel()
	err = r.opts.Agent.AnswerQuestion(ctx, c.CallID, answers)
	r.apply(&agent.ToolResolved{EventBase: r.at(p.session), CallID: c.CallID, Answers: answers})
	return err
}

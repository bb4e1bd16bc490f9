package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// ErrNotActedOn is wrapped (with ErrRPC) when a session the reference CLI
// runs took a control call but did not act on it: its agentState never
// showed the effect within RefActWait.
var ErrNotActedOn = errors.New("the session did not act on it")

// RefActWait bounds how long a control call to a session the reference CLI
// runs waits for its effect to show in the session's agentState.
var RefActWait = 10 * time.Second

// refSentFrom is the meta.sentFrom of a prompt happy writes to a session
// the reference CLI runs.
const refSentFrom = "cli"

// isReference reports whether rb, the read-back of o, is a session the
// reference CLI writes: legacy records and not one canonical record
// (session.Readback.Imported), or no record at all yet and the reference
// CLI's metadata (its happyLibDir, which happy never writes). Such a
// session takes the reference's plain dialect of control inputs. A relay
// that hides a session's canonical rows (or shows another session's
// metadata) can make one of happy's sessions look so; the plain inputs
// happy sends then carry a member the reference app's dialect does not
// have, which a session of happy's refuses as unsealed (refParams).
func isReference(rb *session.Readback, o Opened) bool {
	if rb.Imported() {
		return true
	}
	t := rb.Transcript()
	if rb.Legacy > 0 || len(t.Messages) > 0 || t.Session.ID != o.Info.ID {
		return false
	}
	var m struct {
		LibDir string `json:"happyLibDir"`
	}
	return json.Unmarshal(o.RawMetadata, &m) == nil && m.LibDir != ""
}

// refParams are the params of a plain call to the reference CLI: p plus
// "target", the session they are for. The reference CLI ignores members it
// does not read; a session of happy's, whose dialect shapes are the
// reference app's exactly (AppShapes), refuses the member, so a relay
// cannot downgrade a call meant for one of happy's sessions into an
// unsealed input it acts on.
func refParams(o Opened, p map[string]any) map[string]any {
	p["target"] = o.Info.ID
	return p
}

// referenceRequest is the agentState request id of the permission that
// blocks the tool call callID (as happy log shows it; a request id is
// taken too) in the transcript t, projected by refimport.
func referenceRequest(t mapper.Transcript, callID string) (string, bool) {
	for _, m := range t.Messages {
		for _, p := range m.Parts {
			tp, ok := p.(*mapper.ToolPart)
			if !ok || tp.State.Block == nil || tp.State.Block.Type != mapper.BlockPermission || tp.State.Status != mapper.StatusBlocked {
				continue
			}
			if tp.CallID == callID || tp.State.Block.ID == callID {
				return tp.State.Block.ID, true
			}
		}
	}
	for _, c := range t.Children {
		if id, ok := referenceRequest(c, callID); ok {
			return id, true
		}
	}
	return "", false
}

// callPlain calls "<session>:<method>" of a session the reference CLI runs
// in its dialect: params encrypted with the session key, no envelope. The
// reference CLI's answer is not bound to the call, so it is taken for an
// error only ({"error": …}) and never for a success: the caller checks the
// effect.
func callPlain(ctx context.Context, conn *Conn, o Opened, method string, params any) error {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	plain, err := json.Marshal(params)
	if err != nil {
		return err
	}
	sealed, err := o.Cipher.Seal(plain)
	if err != nil {
		return err
	}
	sock, err := relay.SIODialer(10*time.Second)(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		return fmt.Errorf("%w: connect to the relay: %w", ErrRelay, err)
	}
	defer sock.Close()
	reply, err := sock.Call(ctx, "rpc-call", map[string]any{"method": o.Info.ID + ":" + method, "params": crypto.EncodeBase64(sealed)})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRPC, method, err)
	}
	if len(reply) == 0 {
		return fmt.Errorf("%w: %s: empty acknowledgement", ErrRPC, method)
	}
	ack, _ := reply[0].(map[string]any)
	if ok, _ := ack["ok"].(bool); !ok {
		msg, _ := ack["error"].(string)
		if msg == relayNotAvailable {
			return fmt.Errorf("%w: %s: %w", ErrRPC, method, ErrRPCNotAvailable)
		}
		return fmt.Errorf("%w: %s: %s", ErrRPC, method, msg)
	}
	if res, _ := ack["result"].(string); res != "" {
		if raw, err := crypto.DecodeBase64(res); err == nil {
			if out, err := o.Cipher.Open(raw); err == nil {
				var e struct {
					Error string `json:"error"`
				}
				if json.Unmarshal(out, &e) == nil && e.Error != "" {
					return fmt.Errorf("%w: %s: %s", ErrRPC, method, e.Error)
				}
			}
		}
	}
	return nil
}

// approveReference answers the permission request reqID of a session the
// reference CLI runs ("<sid>:permission" {id, approved, decision, reason?,
// target}) and waits at most RefActWait for the request to move to the
// agentState's completedRequests with the status asked for; a request the
// session does not settle so is ErrNotActedOn.
func approveReference(ctx context.Context, conn *Conn, o Opened, reqID string, d agent.Decision, reason string) error {
	p := map[string]any{"id": reqID, "approved": d != agent.DecisionReject}
	switch d {
	case agent.DecisionAlways:
		p["decision"] = "approved_for_session"
	case agent.DecisionOnce:
		p["decision"] = "approved"
	default:
		p["decision"] = "denied"
	}
	if reason != "" {
		p["reason"] = reason
	}
	if err := callPlain(ctx, conn, o, session.MethodPermission, refParams(o, p)); err != nil {
		return err
	}
	want := "approved"
	if d == agent.DecisionReject {
		want = "denied"
	}
	deadline := time.Now().Add(RefActWait)
	for {
		status, err := completedStatus(ctx, conn, o.Info.ID, reqID)
		if err != nil {
			return err
		}
		switch {
		case status == want:
			return nil
		case status != "":
			return fmt.Errorf("%w: permission %s: %w: it was settled %s", ErrRPC, reqID, ErrNotActedOn, status)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: permission %s: %w: not among its completed requests after %s", ErrRPC, reqID, ErrNotActedOn, RefActWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// refAbortReason is the reason of an abort happy sends the reference CLI
// (which does not read it).
const refAbortReason = "The user doesn't want to proceed: aborted with happy abort."

// abortReference aborts the running turn of a session the reference CLI
// runs ("<sid>:abort" {reason, target}) and waits at most RefActWait for
// the effect it shows: every request that waited is among the completed
// ones (it cancels them; it writes no end of the turn). A session with no
// request waiting has nothing to show, and the call's acknowledgement is
// all there is to check.
func abortReference(ctx context.Context, conn *Conn, o Opened) error {
	pending, _, err := agentRequests(o)
	if err != nil {
		return err
	}
	if err := callPlain(ctx, conn, o, session.MethodAbort, refParams(o, map[string]any{"reason": refAbortReason})); err != nil {
		return err
	}
	deadline := time.Now().Add(RefActWait)
	for {
		now, err := FindSession(ctx, conn, o.Info.ID)
		if err != nil {
			return err
		}
		_, completed, err := agentRequests(now)
		if err != nil {
			return err
		}
		settled := true
		for _, id := range pending {
			if _, ok := completed[id]; !ok {
				settled = false
			}
		}
		if settled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: abort: %w: its waiting permissions were not cancelled within %s", ErrRPC, ErrNotActedOn, RefActWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// agentRequests are the ids of the pending requests of o's agentState and
// its completed requests by id with their status.
func agentRequests(o Opened) (pending []string, completed map[string]string, err error) {
	if o.Info.AgentState == nil || *o.Info.AgentState == "" {
		return nil, nil, nil
	}
	plain, err := decrypt(o.Cipher, *o.Info.AgentState)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the session's agentState does not open: %w", ErrRPC, err)
	}
	var st struct {
		Requests  map[string]json.RawMessage `json:"requests"`
		Completed map[string]struct {
			Status string `json:"status"`
		} `json:"completedRequests"`
	}
	if err := json.Unmarshal(plain, &st); err != nil {
		return nil, nil, fmt.Errorf("%w: the session's agentState: %w", ErrRPC, err)
	}
	for id := range st.Requests {
		pending = append(pending, id)
	}
	completed = map[string]string{}
	for id, c := range st.Completed {
		completed[id] = c.Status
	}
	return pending, completed, nil
}

// completedStatus is the status of request reqID among the
// completedRequests of session sid's agentState as the relay holds it now
// ("" while it is not there).
func completedStatus(ctx context.Context, conn *Conn, sid, reqID string) (string, error) {
	o, err := FindSession(ctx, conn, sid)
	if err != nil {
		return "", err
	}
	_, completed, err := agentRequests(o)
	return completed[reqID], err
}

// sendReference writes text as the next prompt of a session the reference
// CLI runs, in the reference app's shape ({role:"user", content:{type:
// "text", text}, meta:{sentFrom}}) under a random localId, and returns its
// localId and seq.
func sendReference(ctx context.Context, conn *Conn, o Opened, text string) (Sent, error) {
	plain, err := json.Marshal(map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text},
		"meta": map[string]any{"sentFrom": refSentFrom}})
	if err != nil {
		return Sent{}, err
	}
	sealed, err := o.Cipher.Seal(plain)
	if err != nil {
		return Sent{}, err
	}
	id := uuid.NewString()
	seq, err := postPrompt(ctx, conn, o, relay.OutgoingMessage{Content: crypto.EncodeBase64(sealed), LocalID: id})
	if err != nil {
		return Sent{}, err
	}
	return Sent{ID: id, Seq: seq, Reference: true}, nil
}

// IsReferenceSession reports whether o is a session the reference CLI runs
// (isReference of its read-back), whose control calls happy makes in the
// reference's dialect.
func IsReferenceSession(ctx context.Context, conn *Conn, o Opened) (bool, error) {
	rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{})
	if err != nil {
		return false, err
	}
	return isReference(rb, o), nil
}

package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// ErrRPC is wrapped by errors the controlled session (or the relay) gave
// back to a control call: stale answers, refusals, no such method.
var ErrRPC = errors.New("control call failed")

// refusedPrompt is a prompt the session or the relay refused: it is an
// ErrRPC (the command fails as a refused control call does) without
// that error's words in its own.
type refusedPrompt struct{ error }

// Is reports ErrRPC.
func (refusedPrompt) Is(target error) bool { return target == ErrRPC }

// ErrRPCNotAvailable is wrapped (with ErrRPC) when the relay answers that
// nothing registered the method ("RPC method not available": the session
// or the machine's daemon is not connected).
var ErrRPCNotAvailable = errors.New(relayNotAvailable)

// relayNotAvailable is the relay's text for a method nobody registered.
const relayNotAvailable = "RPC method not available"

// CallRPC calls the session RPC "<sessionID>:<method>" over a user-scoped
// socket, with params and result encrypted with the session key, and
// returns the decrypted result. The relay's errors ("RPC method not
// available", timeouts) and the callee's {"error": …} wrap ErrRPC.
func CallRPC(ctx context.Context, conn *Conn, o Opened, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	return CallScopedRPC(ctx, conn, o.Info.ID, o.Cipher, method, params, timeout)
}

// CallScopedRPC is CallRPC for any scope: it calls "<scopeID>:<method>"
// with params sealed in a control envelope (control.Envelope: bound to the
// scope and method, single use, with its issue time) with cipher (a
// session's key, or the account's machine key for a machine RPC,
// docs/ARCHITECTURE.md, sections "Trust" and "The daemon"), and accepts only
// an answer sealed with the same key and bound to that envelope's id: an
// answer the relay replayed or made up is an error wrapping ErrRPC and
// ErrUnboundAnswer, never a success. timeout 0 is 40 s.
func CallScopedRPC(ctx context.Context, conn *Conn, scopeID string, cipher crypto.Cipher, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	if timeout <= 0 {
		timeout = 40 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env, err := control.New(scopeID, method, params, time.Now())
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	sealed, err := cipher.Seal(plain)
	if err != nil {
		return nil, err
	}
	dial := relay.SIODialer(10 * time.Second)
	sock, err := dial(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		return nil, fmt.Errorf("%w: connect to the relay: %w", ErrRelay, err)
	}
	defer sock.Close()
	reply, err := sock.Call(ctx, "rpc-call", map[string]any{"method": scopeID + ":" + method, "params": crypto.EncodeBase64(sealed)})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRPC, method, err)
	}
	if len(reply) == 0 {
		return nil, fmt.Errorf("%w: %s: empty acknowledgement", ErrRPC, method)
	}
	ack, _ := reply[0].(map[string]any)
	if ok, _ := ack["ok"].(bool); !ok {
		msg, _ := ack["error"].(string)
		if msg == "" {
			msg = fmt.Sprint(reply[0])
		}
		if msg == relayNotAvailable {
			return nil, fmt.Errorf("%w: %s: %w", ErrRPC, method, ErrRPCNotAvailable)
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrRPC, method, msg)
	}
	result, _ := ack["result"].(string)
	if result == "" {
		return nil, fmt.Errorf("%w: %s: the session sent no result", ErrRPC, method)
	}
	raw, err := crypto.DecodeBase64(result)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: result: %w", ErrRPC, method, err)
	}
	out, err := cipher.Open(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: the answer does not open with the key: %w", ErrRPC, method, err)
	}
	return openAnswer(method, out, env.ID)
}

// openAnswer reads the opened answer out to the request id: its result, the
// callee's error (with its refusal reason, if any), or ErrUnboundAnswer.
func openAnswer(method string, out []byte, id string) (json.RawMessage, error) {
	res, err := control.OpenAnswer(out, id)
	var callee *control.CalleeError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &callee):
		return nil, fmt.Errorf("%w: %s: %w", ErrRPC, method, err)
	}
	// An error the callee sent before it could read the envelope (an
	// unknown method, params it could not open) is not bound: say what it
	// said, but never take it for an answer. A control answer (it names a
	// request) for another call is the relay replaying an earlier one: the
	// call may have been acted on, so its error is not this call's.
	var e struct {
		Version *int   `json:"happyControl"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(out, &e) == nil && e.Error != "" && e.Version == nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrRPC, method, e.Error)
	}
	return nil, &UnboundAnswerError{Method: method, Plain: out, Err: err}
}

// UnboundAnswerError is an answer that opened with the call's key but is
// not bound to the call (ErrUnboundAnswer): Plain is its opened JSON, which
// a caller may read only where a replayed answer does no harm, e.g. the
// reference CLI's unsealed reply to killSession, which only reports. It
// unwraps to ErrRPC, ErrUnboundAnswer and Err (why it is not bound).
type UnboundAnswerError struct {
	Method string
	Plain  []byte
	Err    error
}

func (e *UnboundAnswerError) Error() string {
	return fmt.Sprintf("%v: %s: %v: %v", ErrRPC, e.Method, ErrUnboundAnswer, e.Err)
}

// Unwrap is ErrRPC, ErrUnboundAnswer and the reason it is not bound.
func (e *UnboundAnswerError) Unwrap() []error { return []error{ErrRPC, ErrUnboundAnswer, e.Err} }

// ErrUnboundAnswer is wrapped by a control call's error when the answer
// opened but was not bound to the call (replayed or forged by the relay, or
// the callee is a happy older than sealed control): the call may or may not
// have been acted on, and the person is told so.
var ErrUnboundAnswer = errors.New("the answer is not bound to this call (replayed or forged by the relay, or an older happy)")

// Approve answers a blocked permission of a running session (decision once
// or always, or reject). A session the reference CLI runs (no canonical
// record, isReference) is answered in its dialect for the request that
// blocks callID, and the answer counts only once the session's agentState
// shows it (approveReference); a callID nothing waits on there is an
// error wrapping ErrRPC.
func Approve(ctx context.Context, conn *Conn, o Opened, callID string, d agent.Decision, reason string) error {
	if rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{}); err == nil && isReference(rb, o) {
		reqID, ok := referenceRequest(rb.Transcript(), callID)
		if !ok {
			return fmt.Errorf("%w: no permission of session %s waits on %s", ErrRPC, o.Info.ID, callID)
		}
		return approveReference(ctx, conn, o, reqID, d, reason)
	}
	p := map[string]any{"callID": callID, "decision": string(d)}
	if reason != "" {
		p["reason"] = reason
	}
	_, err := CallRPC(ctx, conn, o, session.MethodPermission, p, 0)
	return err
}

// Answer answers a blocked question: per question, the selected labels.
func Answer(ctx context.Context, conn *Conn, o Opened, callID string, answers [][]string) error {
	_, err := CallRPC(ctx, conn, o, session.MethodAnswer, map[string]any{"callID": callID, "answers": answers}, 0)
	return err
}

// Abort aborts the running turn of a session; one the reference CLI runs
// in its dialect, checked (abortReference).
func Abort(ctx context.Context, conn *Conn, o Opened) error {
	if rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{}); err == nil && isReference(rb, o) {
		return abortReference(ctx, conn, o)
	}
	_, err := CallRPC(ctx, conn, o, session.MethodAbort, map[string]any{}, 0)
	return err
}

// Send writes a prompt to the session as a canonical user message (relay
// envelope, version 1) filed under the transcript's root session, which
// the session's runner picks up and adopts. It returns the message id.
func Send(ctx context.Context, conn *Conn, o Opened, text string, now time.Time) (string, error) {
	return SendFiles(ctx, conn, o, text, nil, now)
}

// SendFiles is Send with attachments: each file (from UploadFile, already
// stored as a blob) becomes a seed-001 file part after the text part (no
// text part when text is empty and there are files). The row carries a
// sealed control envelope ("control", control.MethodPrompt) bound to the
// relay session; the running session refuses it a second time.
func SendFiles(ctx context.Context, conn *Conn, o Opened, text string, files []Blob, now time.Time) (string, error) {
	s, err := SendPrompt(ctx, conn, o, text, files, now)
	return s.ID, err
}

// Sent is a prompt the relay stored: its message id and the seq the relay
// gave its row (the first receipt, "stored").
type Sent struct {
	ID  string
	Seq int64
	// Reference is set for a prompt to a session the reference CLI runs:
	// ID is the row's localId, and no receipts come.
	Reference bool
}

// SendPrompt is SendFiles that also returns the row's seq.
func SendPrompt(ctx context.Context, conn *Conn, o Opened, text string, files []Blob, now time.Time) (Sent, error) {
	// The prompt is filed under the transcript's root session, whose record
	// the running session writes first; a session started a moment ago may
	// not have written it yet, so wait a little for it.
	var root string
	for attempt := 0; ; attempt++ {
		rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{})
		if err != nil {
			return Sent{}, fmt.Errorf("read the session before sending: %w", err)
		}
		if isReference(rb, o) {
			// The reference CLI runs it: the prompt goes in the
			// reference app's shape.
			if len(files) > 0 {
				return Sent{}, refusedPrompt{fmt.Errorf("session %s is the reference CLI's: happy sends it text only", o.Info.ID)}
			}
			return sendReference(ctx, conn, o, text)
		}
		if root = rb.Transcript().Session.ID; strings.HasPrefix(root, "ses_") {
			break
		}
		if attempt == 20 {
			return Sent{}, refusedPrompt{fmt.Errorf("session %s has no transcript yet (is it running?)", o.Info.ID)}
		}
		select {
		case <-ctx.Done():
			return Sent{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return Sent{}, err
	}
	// Time-ordered, so that readers sort it after what came before.
	id := "msg_" + fmt.Sprintf("%013d", now.UnixMilli()) + hex.EncodeToString(rnd[:])
	sid := root
	env := map[string]any{
		"kind": session.KindMessage, "version": 1,
		"info": map[string]any{"id": id, "sessionID": sid, "role": "user", "time": map[string]any{"created": now.UnixMilli()},
			"agent": "build", "model": map[string]any{"providerID": "", "modelID": ""}},
	}
	var parts []any
	if text != "" || len(files) == 0 {
		parts = append(parts, map[string]any{"id": "prt_" + id[4:], "sessionID": sid, "messageID": id, "type": "text", "text": text})
	}
	for i, f := range files {
		part := map[string]any{"id": fmt.Sprintf("prt_%s%02d", id[4:], i+1), "sessionID": sid, "messageID": id,
			"type": "file", "mime": f.Mime, "url": f.URL}
		if f.Filename != "" {
			part["filename"] = f.Filename
		}
		if len(f.Source) > 0 {
			part["source"] = f.Source
		}
		parts = append(parts, part)
	}
	env["parts"] = parts
	// The prompt is a control input: sealed with its target, a unique id
	// and its issue time, so the relay can neither replay it nor move it to
	// another session (docs/ARCHITECTURE.md, "Trust").
	ctl, err := control.New(o.Info.ID, control.MethodPrompt, nil, now)
	if err != nil {
		return Sent{}, err
	}
	env["control"] = ctl
	plain, err := json.Marshal(env)
	if err != nil {
		return Sent{}, err
	}
	sealed, err := o.Cipher.Seal(plain)
	if err != nil {
		return Sent{}, err
	}
	row := relay.OutgoingMessage{Content: crypto.EncodeBase64(sealed), LocalID: id + "." + strconv.Itoa(1)}
	seq, err := postPrompt(ctx, conn, o, row)
	if err != nil {
		return Sent{}, err
	}
	return Sent{ID: id, Seq: seq}, nil
}

// promptRetries are the waits before posting a prompt's row again after
// the relay did not confirm it (unreachable, a timeout, a 5xx).
var promptRetries = []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second}

// postPrompt stores a prompt's row and returns its seq. A post the relay
// does not confirm is made again with the very same row and localId, never
// a new prompt: if the first post was stored after all, the relay answers
// with that row, and a session would refuse a copy as replayed. A row that
// was already stored under the localId must be this one (its ciphertext),
// or it is someone else's claim and the prompt is refused. When the relay
// never confirms, the error says the prompt may have been stored.
func postPrompt(ctx context.Context, conn *Conn, o Opened, row relay.OutgoingMessage) (int64, error) {
	for attempt := 0; ; attempt++ {
		stored, err := conn.API.SendMessages(ctx, o.Info.ID, []relay.OutgoingMessage{row})
		if err == nil {
			if !stored[0].New {
				page, ferr := conn.API.FetchMessages(ctx, o.Info.ID, stored[0].Seq-1, 1)
				if ferr != nil {
					return 0, fmt.Errorf("send prompt: check the row the relay says it holds: %w", ferr)
				}
				if len(page.Messages) != 1 || page.Messages[0].Seq != stored[0].Seq || page.Messages[0].Content.C != row.Content {
					return 0, refusedPrompt{fmt.Errorf("send prompt: the relay holds another row under %s: the prompt was not stored", row.LocalID)}
				}
			}
			return stored[0].Seq, nil
		}
		if !errors.Is(err, relay.ErrUnavailable) {
			return 0, fmt.Errorf("send prompt: %w", err)
		}
		if attempt == len(promptRetries) {
			return 0, fmt.Errorf("send prompt: the relay did not confirm it (%w); it may have been stored: see happy log %s before sending it again", err, o.Info.ID)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("send prompt: the relay did not confirm it (%w); it may have been stored: see happy log %s before sending it again", ctx.Err(), o.Info.ID)
		case <-time.After(promptRetries[attempt]):
		}
	}
}

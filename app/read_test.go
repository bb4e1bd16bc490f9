package app

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
)

// userRecord is a canonical user message record with one text part.
func userRecord(version int64, text string) []byte {
	return fmt.Appendf(nil, `{"kind":"message","version":%d,"info":{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}},"parts":[{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"text","text":%q}]}`, version, text)
}

// A row's ciphertext stored again under a higher version's localId (a
// replay the relay, or a holder of the token, can make) would win over
// the record's real last version; every reader refuses it as
// wrong_localid instead: `happy log` (ReadTranscript) and its --follow
// (FollowSession) alike.
func TestReadersRefuseAReplayedRow(t *testing.T) {
	_, connA, connB := twoDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tag, err := NewTag()
	if err != nil {
		t.Fatal(err)
	}
	s, err := connA.Client.OpenSession(ctx, relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{"path":"/w"}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(rec string, body []byte) {
		t.Helper()
		if _, err := s.Enqueue(ctx, rec, func(int64) ([]byte, error) { return body, nil }); err != nil {
			t.Fatal(err)
		}
	}
	write("ses_1", []byte(`{"kind":"session","version":1,"session":{"id":"ses_1","projectID":"","directory":"/w","title":"t","time":{"created":1,"updated":1}}}`))
	write("msg_1", userRecord(1, "first"))
	write("msg_1", userRecord(2, "second"))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := connB.API.FetchMessages(ctx, s.ID(), 0, 10)
	if err != nil || len(page.Messages) != 3 || page.Messages[1].LocalIDOrEmpty() != "msg_1.1" {
		t.Fatalf("rows %+v %v", page.Messages, err)
	}
	if _, err := connB.API.SendMessages(ctx, s.ID(), []relay.OutgoingMessage{{Content: page.Messages[1].Content.C, LocalID: "msg_1.3"}}); err != nil {
		t.Fatal(err)
	}
	o, err := FindSession(ctx, connB, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, tr mapper.Transcript) {
		t.Helper()
		if len(tr.Messages) != 1 || len(tr.Messages[0].Parts) != 1 || tr.Messages[0].Parts[0].(*mapper.TextPart).Text != "second" {
			t.Fatalf("%s: messages %s", what, mustJSON(t, tr.Messages))
		}
		if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropWrongLocalID || tr.Dropped[0].Line != 4 ||
			tr.Dropped[0].Detail != `row is not the record version its localId names: stored under localId "msg_1.3", but it is msg_1 version 1` {
			t.Fatalf("%s: dropped %+v", what, tr.Dropped)
		}
	}
	rb, last, err := ReadTranscript(ctx, connB, o, ReadOptions{})
	if err != nil || last != 4 {
		t.Fatalf("read to %d: %v", last, err)
	}
	check("happy log", rb.Transcript())

	rows := make(chan RowEvent, 8)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	go func() { _ = FollowSession(fctx, connB, o, 0, rows) }()
	frb := readbackOf(o)
	for n := 0; n < 4; n++ {
		select {
		case ev := <-rows:
			if ev.Dropped != nil {
				t.Fatalf("row %d dropped by the stream: %+v", ev.Seq, ev.Dropped)
			}
			frb.Add(ev.Seq, ev.LocalID, ev.Plain)
		case <-ctx.Done():
			t.Fatalf("followed %d rows", n)
		}
	}
	check("happy log --follow", frb.Transcript())
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/happy-dev/happy/server/servertest"
)

// TestConcurrentAppendsKeepSeqOrder: concurrent posts of one account
// (sharing group commits) and other updates made meanwhile (new
// sessions) reach an app's socket in account seq order, one seq each
// with no gap, and each session's messages in session seq order.
func TestConcurrentAppendsKeepSeqOrder(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sids := []string{a.createSession("o0", "m")["id"].(string), a.createSession("o1", "m")["id"].(string)}
	u := userSocket(t, r.URL, a.token)
	in := listen(t, u, "update")

	const writers, posts, batch, newSessions = 8, 5, 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range posts {
				msgs := make([]map[string]string, batch)
				for k := range msgs {
					msgs[k] = map[string]string{"localId": fmt.Sprintf("w%d-p%d-%d", w, p, k), "content": "c"}
				}
				body, _ := json.Marshal(map[string]any{"messages": msgs})
				req, _ := http.NewRequest("POST", r.URL+"/v3/sessions/"+sids[w%2]+"/messages", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+a.token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("post: HTTP %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	for i := range newSessions {
		a.createSession(fmt.Sprint("n", i), "m")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := writers*posts*batch + newSessions
	var last int64
	lastMsg := map[string]int64{}
	kinds := map[string]int{}
	for i := range total {
		ev := in.next()
		up := obj(t, ev.args[0])
		seq := int64(up["seq"].(float64))
		if i > 0 && seq != last+1 {
			t.Fatalf("update %d: seq %d after %d", i, seq, last)
		}
		last = seq
		body := obj(t, up["body"])
		kind := body["t"].(string)
		kinds[kind]++
		if kind == "new-message" {
			sid := body["sid"].(string)
			ms := int64(obj(t, body["message"])["seq"].(float64))
			if ms != lastMsg[sid]+1 {
				t.Fatalf("session %s: message seq %d after %d", sid, ms, lastMsg[sid])
			}
			lastMsg[sid] = ms
		}
	}
	eq(t, "updates by kind", kinds, map[string]int{"new-message": writers * posts * batch, "new-session": newSessions})
	eq(t, "last message seqs", lastMsg, map[string]int64{sids[0]: writers / 2 * posts * batch, sids[1]: writers / 2 * posts * batch})
	in.none()
}

package server_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server/servertest"
)

// TestLookupFindsAFreshRequestAfterAFlood: GET /v1/auth/request/lookup
// reads at most 10 000 live pairing requests. A client with ~85 addresses
// (127.0.0.x, each within the default --rate-pairing burst) opens 10 200 of
// them; a terminal's request made after them is still found by its code,
// because the lookup reads the newest first (found by an attack review,
// when it read the oldest).
func TestLookupFindsAFreshRequestAfterAFlood(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	post := func(c *http.Client, pk []byte) int {
		b, _ := json.Marshal(map[string]any{"publicKey": base64.StdEncoding.EncodeToString(pk)})
		resp, err := c.Post(r.URL+"/v1/auth/request", "application/json", bytes.NewReader(b))
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for a := 2; a < 87; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(a/250), byte(a%250+2))}}
			c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
			for i := 0; i < 120; i++ {
				pk := make([]byte, 32)
				_, _ = rand.Read(pk)
				if post(c, pk) == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("flood: %d pairing requests accepted", ok)
	// The victim's request is stamped after every request of the flood.
	floodEnd := time.Now().UnixMilli()
	waitfor.Poll{Every: time.Millisecond}.Until(t, "the clock to pass the flood's last millisecond", func() bool {
		return time.Now().UnixMilli() > floodEnd
	})
	pub, _, err := crypto.NewBoxKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	if st := post(http.DefaultClient, pub[:]); st != 200 {
		t.Fatalf("victim request: %d", st)
	}
	code := crypto.PairingCode(pub)
	req, _ := http.NewRequest("GET", r.URL+"/v1/auth/request/lookup?code="+code, nil)
	req.Header.Set("Authorization", "Bearer "+acct.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Requests []json.RawMessage }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if len(out.Requests) == 0 {
		t.Fatalf("after %d junk pairing requests from 85 addresses, the lookup of a live request's code %s finds nothing (HTTP %d)", ok, code, resp.StatusCode)
	}
	_ = fmt.Sprint
}

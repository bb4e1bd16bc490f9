package main

import (
	"testing"
	"time"

	"github.com/happy-dev/happy/server"
)

// The limit flags of happy server are checked before anything starts.
func TestServerLimitFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"server", "--header-timeout", "500ms"}, "happy: --header-timeout must be between 1s and 24h, got 500ms\n"},
		{[]string{"server", "--body-timeout", "48h"}, "happy: --body-timeout must be between 1s and 24h, got 48h0m0s\n"},
		{[]string{"server", "--min-body-rate", "-1"}, "happy: --min-body-rate must be at least 1 (bytes a second), got -1\n"},
		{[]string{"server", "--max-conns-per-addr", "-2"}, "happy: --max-conns-per-addr must be at least 1, or -1 for no cap, got -2\n"},
		{[]string{"server", "--rate-auth", "30"}, "happy: --rate-auth: limit \"30\": want BURST/EVERY (e.g. 30/2s) or off\n"},
		{[]string{"server", "--rate-session", "0/1s"}, "happy: --rate-session: limit \"0/1s\": burst must be a whole number of at least 1\n"},
		{[]string{"server", "--rate-lookup", "5/soon"}, "happy: --rate-lookup: limit \"5/soon\": EVERY must be a positive duration such as 2s or 1m\n"},
	} {
		c, stdout, stderr := runHappy(t, nil, tc.args...)
		if c != exitUsage || stdout != "" || stderr != tc.stderr {
			t.Errorf("%v = %d %q %q, want %q", tc.args, c, stdout, stderr, tc.stderr)
		}
	}
}

// The flags' values reach the relay's configuration; zero values are the
// defaults.
func TestServerLimitsConfig(t *testing.T) {
	var cfg server.Config
	opts := serverOptions{headerTimeout: 5 * time.Second, maxConnsPerAddr: -1, rateAuth: "off", rateSession: "10/1m"}
	if err := serverLimits(opts, &cfg); err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.HeaderTimeout, cfg.BodyTimeout, cfg.MaxConnsPerAddr, cfg.AuthRate, cfg.SessionRate, cfg.PairingRate}
	want := []any{5 * time.Second, time.Duration(0), -1, server.Unlimited, server.Limit{Every: time.Minute, Burst: 10}, server.Limit{}}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("value %d = %v, want %v", i, got[i], want[i])
		}
	}
	if d := limitFlag(server.DefaultAuthRate); d != "30/2s" {
		t.Errorf("default --rate-auth %q", d)
	}
}

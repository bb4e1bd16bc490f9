package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrNoEndpoint: `happy hook` runs outside a happy session (EnvURL or
// EnvSecret is missing).
var ErrNoEndpoint = errors.New("no happy session to report to (" + EnvURL + " / " + EnvSecret + " not set)")

// ErrRefused: the server answered with an HTTP error.
var ErrRefused = errors.New("hook refused by happy")

// Forward is the body of `happy hook <event>`: it reads the payload from in
// (at most DefaultMaxBody bytes), posts it to the running happy found in the
// environment, and copies the answer (a hook output JSON, or nothing) to
// out. client nil means http.DefaultClient; it must not time out, since a
// PermissionRequest waits for a person. Errors: ErrNoEndpoint, ErrRefused
// (wrapped, with the status and the server's message), transport errors.
func Forward(ctx context.Context, event string, in io.Reader, out io.Writer, getenv func(string) string, client *http.Client) error {
	base, secret := getenv(EnvURL), getenv(EnvSecret)
	if base == "" || secret == "" {
		return ErrNoEndpoint
	}
	if !validName(event) {
		return fmt.Errorf("hook %q: %w", event, ErrEventNameFormat)
	}
	body, err := io.ReadAll(io.LimitReader(in, DefaultMaxBody+1))
	if err != nil {
		return fmt.Errorf("hook %s: read payload: %w", event, err)
	}
	if len(body) > DefaultMaxBody {
		return fmt.Errorf("hook %s: payload larger than %d bytes", event, DefaultMaxBody)
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/hook/"+event, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("hook %s: %w", event, err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("hook %s: %w", event, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("hook %s: %w: %s: %s", event, ErrRefused, resp.Status, strings.TrimSpace(string(msg)))
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("hook %s: write answer: %w", event, err)
	}
	return nil
}

//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// The OpenClaw row of the matrix: happy openclaw --start-gateway runs the
// pinned gateway (openclaw 2026.9.6, on the Node 24 runtime of the agent
// cache, HAPPY_E2E_NODE24) on a free loopback port, with a config whose
// only model provider is the fake model (anthropic-messages) and whose exec
// tool asks an operator for every command: happy is that operator.

// openclawShell is the model's call of OpenClaw's exec tool. OpenClaw does
// not let an operator approve a command it cannot bind to concrete
// executables and files: a shell redirection (the matrix's echo hi > FILE)
// is refused before anyone is asked ("SYSTEM_RUN_DENIED: approval cannot
// safely bind this command"). The call copies a file holding "hi\n" that
// the setup leaves in the working folder instead: the same file content,
// with nothing but an executable and its operands.
func openclawShell(_, file string) fakemodel.ToolCall {
	return fakemodel.ToolCall{Name: "exec", Input: map[string]any{"command": "cp " + openclawHi + " " + file}}
}

// openclawHi is the file openclawShell copies, in the cell's folder.
const openclawHi = ".hi"

// openclawSetup writes HOME/.openclaw/openclaw.json for a cell.
func openclawSetup(t *testing.T, c *matrixCell) agentSetup {
	t.Helper()
	node := os.Getenv("HAPPY_E2E_NODE24")
	if node == "" {
		t.Skip("HAPPY_E2E_NODE24 not set (make e2e installs the Node 24 runtime OpenClaw needs)")
	}
	node, err := filepath.EvalSymlinks(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.work, openclawHi), []byte("hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	if err := os.MkdirAll(filepath.Join(h, ".openclaw"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"gateway": map[string]any{"mode": "local"},
		"models": map[string]any{"mode": "replace", "providers": map[string]any{"fake": map[string]any{
			"baseUrl": c.model.URL, "apiKey": "e2e-dummy-key", "api": "anthropic-messages",
			"models": []any{map[string]any{"id": "fake-model", "name": "Fake", "reasoning": false, "input": []string{"text"},
				"contextWindow": 200000, "maxTokens": 4096}},
		}}},
		"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "fake/fake-model"}, "workspace": c.work}},
		"tools":  map[string]any{"exec": map[string]any{"host": "gateway", "security": "full", "ask": "always"}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(h, ".openclaw", "openclaw.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Dir(node) + ":" + os.Getenv("PATH"), "TERM=xterm-256color", "HOME=" + h,
		"HAPPY_OPENCLAW_PATH=" + c.bin}
	return agentSetup{env: env, sub: []string{"openclaw", "--start-gateway", "--gateway-log", filepath.Join(h, "gateway.log")},
		paths: map[string]string{h: "<HOME>"}}
}

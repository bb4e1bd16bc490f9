//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/happy-dev/happy/adapters/codex"
)

// The Codex scenarios (app-server on 0.171.0, mcp-server on 0.150.0) are
// rows of the real-agent matrix (matrix_test.go); the helpers here set
// Codex up against the fake model.

// codexConfig is CODEX_HOME/config.toml: the fake model as the only
// provider, no retries, and the features that reach public hosts at start
// turned off.
func codexConfig(modelURL string) string {
	return fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
apps = false
remote_plugin = false
`, modelURL)
}

// codexEnv is the environment of happy wrapping Codex against the fake model.
func codexEnv(home, codexHome, happyHome, relayURL, codexBin string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm-256color",
		"HAPPY_HOME_DIR=" + happyHome, "HAPPY_CODEX_PATH=" + codexBin, "HAPPY_SERVER_URL=" + relayURL,
		"CODEX_HOME=" + codexHome, "FAKE_API_KEY=sk-e2e-dummy", "RUST_LOG=warn",
	}
}

// pinPromptModel replaces the model of the first user message by a
// placeholder after checking it is one of the two values a run can give
// today. On app-server, Codex names the model in its thread/start answer,
// before the first prompt; the session runner picks at random between that
// waiting agent event and the waiting prompt, so the prompt records either
// the thread's model (fake-model from provider fake) or none yet (the
// provider happy assumed, openai). Anything else fails the test.
func pinPromptModel(t *testing.T, doc []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("log --json: %v", err)
	}
	msgs, _ := v["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("log --json has no messages")
	}
	info, _ := msgs[0].(map[string]any)["info"].(map[string]any)
	if info == nil || info["role"] != "user" {
		t.Fatalf("first message is not the prompt: %v", msgs[0])
	}
	m, _ := info["model"].(map[string]any)
	got := fmt.Sprintf("%v/%v", m["providerID"], m["modelID"])
	if got != "fake/fake-model" && got != "openai/" {
		t.Fatalf("prompt model %q, want fake/fake-model or openai/", got)
	}
	info["model"] = map[string]any{"providerID": "<fake or openai>", "modelID": "<fake-model or empty>"}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// auto reads the installed version: both pinned Codex builds have the v2
// app-server, so both get it (which is why the matrix's codex-mcp row pins
// mcp).
func TestE2ECodexChooseProtocol(t *testing.T) {
	for _, tc := range []struct{ agent, version string }{{"CODEX", "0.171.0"}, {"CODEX150", "0.150.0"}} {
		bin := agentBinary(t, tc.agent)
		p, v, err := codex.ChooseProtocol(context.Background(), bin)
		if err != nil || p != codex.ProtocolAppServer || v != tc.version {
			t.Errorf("%s: ChooseProtocol = %q, %q, %v; want app-server, %s", tc.agent, p, v, err, tc.version)
		}
	}
}

//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// Setup of the ACP agents that run against internal/fakemodel: codex-acp
// (Codex's engine behind ACP, OpenAI Responses wire API) and OpenCode
// (`opencode acp`, Anthropic Messages wire API). Each gets throwaway home
// folders and a configuration that names the fake model as its only
// provider and turns off everything that would reach a public host.

// codexACPModel is the fake model codex-acp talks to: one shell command
// that writes hi.txt, escalated out of the read-only sandbox so that Codex
// asks for approval, then an answer that says whether it ran (codexFinal).
func codexACPModel(t *testing.T) *fakemodel.Server {
	t.Helper()
	model, err := fakemodel.New(fakemodel.Script{
		Decide: func(req fakemodel.Request) fakemodel.Reply {
			switch {
			case !req.HasTools:
				return fakemodel.Reply{Text: "Fake title"}
			case req.ToolDone:
				return codexFinal(req)
			}
			return fakemodel.Reply{ToolName: "exec_command", ToolInput: map[string]any{"cmd": "echo hi > hi.txt",
				"sandbox_permissions": "require_escalated", "justification": "Need to write hi.txt"}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	return model
}

// codexACPEnv is the environment codex-acp needs against the fake model at
// modelURL: a throwaway HOME and CODEX_HOME holding the same config.toml
// as Codex (codexConfig), and the provider's key. It returns the variables
// and CODEX_HOME.
func codexACPEnv(t *testing.T, modelURL string) ([]string, string) {
	t.Helper()
	home := t.TempDir()
	codexHome := filepath.Join(home, "codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(modelURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "FAKE_API_KEY=sk-e2e-dummy", "RUST_LOG=warn"}, codexHome
}

// openCodeModel is the fake model OpenCode talks to: its bash tool writes
// hi.txt, then "Created hi.txt."; the title request gets "Fake title".
func openCodeModel(t *testing.T) *fakemodel.Server {
	t.Helper()
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "bash",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	return model
}

// openCodeConfig is OpenCode's opencode.json: the anthropic provider at
// the fake model (baseURL with /v1, the path its SDK appends /messages to)
// with one model of its own, bash commands asking for permission (so
// happy is asked), no automatic update and no sharing.
func openCodeConfig(modelURL string) map[string]any {
	return map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"autoupdate":  false,
		"share":       "disabled",
		"model":       "anthropic/fake-model",
		"small_model": "anthropic/fake-model",
		"provider": map[string]any{
			"anthropic": map[string]any{
				"options": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "sk-e2e-dummy"},
				"models":  map[string]any{"fake-model": map[string]any{"name": "Fake model"}},
			},
		},
		"permission": map[string]any{"bash": "ask"},
	}
}

// openCodeEnv is the environment `happy opencode` needs against the fake
// model at modelURL with OpenCode binary bin: throwaway HOME and XDG
// folders (OpenCode keeps its database, logs and caches there), the
// configuration file (openCodeConfig), no update check, no sharing, no
// models.dev catalogue and no language-server downloads. OpenCode also
// installs a plugin package into its config folder in the background: the
// npm registry is pointed at the fake model, which answers 404, so that
// no lookup of a public host is even tried.
func openCodeEnv(t *testing.T, modelURL, bin string) []string {
	t.Helper()
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"home", "config", "data", "cache", "state"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.MarshalIndent(openCodeConfig(modelURL), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "opencode.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{
		"HOME=" + dirs["home"], "XDG_CONFIG_HOME=" + dirs["config"], "XDG_DATA_HOME=" + dirs["data"],
		"XDG_CACHE_HOME=" + dirs["cache"], "XDG_STATE_HOME=" + dirs["state"],
		"OPENCODE_CONFIG=" + cfg, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"npm_config_registry=" + modelURL + "/npm-registry/",
		"HAPPY_OPENCODE_PATH=" + bin,
	}
}

// scrubKeys replaces, anywhere in a JSON document, the values of the named
// members by "<key>" (values a real agent makes up per run: its process
// ids, start times, durations).
func scrubKeys(t *testing.T, doc []byte, keys ...string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("scrub: %v", err)
	}
	drop := map[string]bool{}
	for _, k := range keys {
		drop[k] = true
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if drop[k] {
					x[k] = "<" + k + ">"
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// codex-acp 0.16.0 through `happy acp -- codex-acp` against the fake
// OpenAI Responses API: it asks for permission before it announces the
// tool, another machine approves, Codex runs the command itself.
func TestE2EACPCodexACPApproved(t *testing.T) {
	bin := agentBinary(t, "CODEX_ACP")
	model := codexACPModel(t)
	env, codexHome := codexACPEnv(t, model.URL)
	r := newACPRun(t, env)
	started := time.Now()
	r.start(t, "acp", bin)
	r.waitBlocked(t)
	r.approveAndFinish(t, "Created hi.txt.")
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the fake model saw %d requests, want the tool call and the answer", n)
	}
	r.checkReplay(t, "bash")
	// finalLog's document scrubbed of what Codex makes up per run, indented
	// again (normalize changes nothing more in a normalised document).
	doc := scrubKeys(t, r.finalLog(t), "started_at_ms", "completed_at_ms", "process_id", "duration")
	golden(t, "acp-codex-acp-approved.json", normalize(t, doc, map[string]string{codexHome: "<CODEX_HOME>"}))
	t.Logf("wall time %s", time.Since(started).Round(time.Millisecond))
}

// OpenCode 1.18.33 through `happy opencode` against the fake Anthropic
// API: its bash tool asks for permission (permission.bash = "ask"),
// another machine approves, OpenCode runs the command itself.
func TestE2EACPOpenCodeApproved(t *testing.T) {
	bin := agentBinary(t, "OPENCODE")
	model := openCodeModel(t)
	r := newACPRun(t, openCodeEnv(t, model.URL, bin))
	r.blockWait = 3 * time.Minute // OpenCode starts slowly on a busy machine
	started := time.Now()
	r.start(t, "opencode")
	r.waitBlocked(t)
	r.approveAndFinish(t, "Created hi.txt.")
	var tools int
	for _, req := range model.Requests() {
		if req.HasTools {
			tools++
		}
	}
	if tools != 2 {
		t.Errorf("the fake model saw %d requests with tools, want the tool call and the answer", tools)
	}
	r.checkReplay(t, "bash")
	golden(t, "acp-opencode-approved.json", r.finalLog(t))
	t.Logf("wall time %s", time.Since(started).Round(time.Millisecond))
}

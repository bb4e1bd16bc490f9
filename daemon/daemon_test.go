//go:build unix

package daemon

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/home"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeSessionEnv); mode != "" {
		os.Exit(fakeSession(mode))
	}
	// IgnoreCurrent: the Socket.IO engine client starts a network monitor
	// at package init that never stops. Its timers (ping timeouts,
	// reconnect delays) may outlive the last test by seconds; only those
	// are ignored.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"))
}

func TestSpawnArgs(t *testing.T) {
	cases := []struct {
		name    string
		req     SpawnRequest
		want    []string
		wantErr string
	}{
		{"claude", SpawnRequest{Agent: "claude"}, []string{"claude", "--remote", "--started-by", "daemon"}, ""},
		// The prompt is never an argument (start hands it over on a pipe).
		{"codex with mode and prompt", SpawnRequest{Agent: "codex", PermissionMode: "read-only", Prompt: "-p rm -rf /"},
			[]string{"codex", "--started-by", "daemon", "--permission-mode=read-only"}, ""},
		{"default mode of an agent without modes", SpawnRequest{Agent: "gemini", PermissionMode: "default"}, []string{"gemini", "--started-by", "daemon"}, ""},
		{"claude mode", SpawnRequest{Agent: "claude", PermissionMode: "plan"}, []string{"claude", "--remote", "--started-by", "daemon", "--permission-mode=plan"}, ""},
		{"unknown agent", SpawnRequest{Agent: "bash"}, nil, `unknown agent "bash" (this daemon starts claude, codex, gemini, openclaw, opencode)`},
		{"a command as agent", SpawnRequest{Agent: "/bin/sh -c id"}, nil, `unknown agent "/bin/sh -c id" (this daemon starts claude, codex, gemini, openclaw, opencode)`},
		{"no agent", SpawnRequest{}, nil, `unknown agent "" (this daemon starts claude, codex, gemini, openclaw, opencode)`},
		{"bad mode", SpawnRequest{Agent: "codex", PermissionMode: "--yolo"}, nil, `permission mode "--yolo" is not one of codex's (default, read-only, safe-yolo, yolo)`},
		{"mode of another agent", SpawnRequest{Agent: "claude", PermissionMode: "yolo"}, nil, `permission mode "yolo" is not one of claude's (default, acceptEdits, plan, bypassPermissions)`},
		{"NUL in prompt", SpawnRequest{Agent: "codex", Prompt: "a\x00b"}, nil, "the first prompt is over 65536 bytes or holds a NUL byte"},
		{"resume", SpawnRequest{Agent: "claude", ResumeSessionID: "cmx1_a-B", Prompt: "go on"}, []string{"resume", "cmx1_a-B", "--remote", "--started-by", "daemon"}, ""},
		{"resume with a mode", SpawnRequest{Agent: "claude", ResumeSessionID: "s1", PermissionMode: "plan"}, nil, `permission mode "plan": a resumed session keeps its own`},
		{"resume of codex", SpawnRequest{Agent: "codex", ResumeSessionID: "s1"}, nil, "resuming a codex session through the daemon is not supported (Claude sessions only)"},
		{"resume id as a flag", SpawnRequest{Agent: "claude", ResumeSessionID: "--yolo"}, nil, `session id "--yolo" is not a session id`},
		{"resume id with a space", SpawnRequest{Agent: "claude", ResumeSessionID: "a b"}, nil, `session id "a b" is not a session id`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := spawnArgs(tc.req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("spawnArgs error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spawnArgs = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestResolveDir(t *testing.T) {
	uh, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home folder")
	}
	cases := []struct{ in, want, wantErr string }{
		{"/srv/x/../y", "/srv/y", ""},
		{"~", uh, ""},
		{"~/code", filepath.Join(uh, "code"), ""},
		{"code", "", `directory "code" is not an absolute path`},
		{"", "", `directory "" is not an absolute path`},
		{"~bob/x", "", `directory "~bob/x" is not an absolute path`},
	}
	for _, c := range cases {
		got, err := resolveDir(c.in)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("resolveDir(%q) error %v, want %s", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("resolveDir(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestRedactPrompt(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"agent":"codex","prompt":"secret plan","token":"t"}`, `{"agent":"codex","prompt":"(11 bytes)"}`},
		{`{"agent":"codex"}`, `{"agent":"codex"}`},
		{`[1]`, `{}`},
		{`nope`, `{}`},
	}
	for _, c := range cases {
		if got := string(redactPrompt(json.RawMessage(c.in))); got != c.want {
			t.Errorf("redactPrompt(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestFindMachine(t *testing.T) {
	ms := []Machine{{ID: "aaaa-1", Host: "box"}, {ID: "aabb-2", Host: "Laptop"}, {ID: "cc-3", Host: "laptop"}}
	cases := []struct{ ref, want, wantErr string }{
		{"aaaa-1", "aaaa-1", ""},
		{"aab", "aabb-2", ""},
		{"box", "aaaa-1", ""},
		{"aa", "", `no such machine: "aa" names 2 machines; give the machine id (happy machines)`},
		{"laptop", "", `no such machine: "laptop" names 2 machines; give the machine id (happy machines)`},
		{"zz", "", `no such machine: "zz" (happy machines lists them)`},
	}
	for _, c := range cases {
		got, err := FindMachine(ms, c.ref)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("FindMachine(%q) error %v, want %s", c.ref, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.ID != c.want {
			t.Errorf("FindMachine(%q) = %q, %v; want %q", c.ref, got.ID, err, c.want)
		}
	}
}

// The unit runs happy daemon run with the home and the environment the
// agents need; systemd-analyze verifies it where it is installed.
func TestUnit(t *testing.T) {
	h, err := home.New(filepath.Join(t.TempDir(), "my %home"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": cfg, "PATH": "/usr/bin:/bin", "HAPPY_SERVER_URL": "https://relay.example/x"}
	u, err := NewUnit(UnitOptions{Home: h, Executable: exe, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.Name, "happy-daemon-") || !strings.HasSuffix(u.Name, ".service") || len(u.Name) != len("happy-daemon-12345678.service") {
		t.Errorf("unit name %q", u.Name)
	}
	if u.Path != filepath.Join(cfg, "systemd", "user", u.Name) {
		t.Errorf("unit path %q", u.Path)
	}
	hp := strings.ReplaceAll(h.Path(), "%", "%%")
	want := "[Unit]\nDescription=happy daemon for " + hp + "\nAfter=network-online.target\nWants=network-online.target\n\n" +
		"[Service]\nType=simple\nExecStart=\"" + exe + "\" daemon run\n" +
		"Environment=\"HAPPY_HOME_DIR=" + hp + "\"\nEnvironment=\"PATH=/usr/bin:/bin\"\nEnvironment=\"HAPPY_SERVER_URL=https://relay.example/x\"\n" +
		"EnvironmentFile=-" + hp + "/daemon.env\n" +
		"Restart=on-failure\nRestartSec=5\nKillMode=mixed\nTimeoutStopSec=30\n\n[Install]\nWantedBy=default.target\n"
	if u.EnvFile != h.Join("daemon.env") {
		t.Errorf("environment file %q", u.EnvFile)
	}
	if u.Text != want {
		t.Errorf("unit:\n%s\nwant:\n%s", u.Text, want)
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit is not verified")
	}
	p := filepath.Join(t.TempDir(), u.Name)
	if err := os.WriteFile(p, []byte(u.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", p).CombinedOutput()
	if err != nil || strings.Contains(string(out), u.Name) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// FuzzSpawnRequest: any request either is refused or starts one of the
// known agent commands of happy, with every value of the request inside
// one --flag=value argument.
func FuzzSpawnRequest(f *testing.F) {
	for _, s := range []string{`{"agent":"claude","directory":"/w"}`, `{"agent":"codex","permissionMode":"yolo","prompt":"hi"}`,
		`{"agent":"sh"}`, `{"agent":"codex","prompt":"--codex-path=/bin/sh"}`, `[]`, `{"agent":1}`,
		`{"agent":"claude","resumeSessionId":"-p"}`, `{"agent":"claude","resumeSessionId":"abc","prompt":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req SpawnRequest
		if json.Unmarshal(b, &req) != nil {
			return
		}
		args, err := spawnArgs(req)
		if err != nil {
			return
		}
		base := agentArgs[req.Agent]
		if req.ResumeSessionID != "" {
			base = []string{"resume", req.ResumeSessionID, "--remote"}
			if req.Agent != "claude" || !validID(req.ResumeSessionID) {
				t.Fatalf("resume of %q %q accepted", req.Agent, req.ResumeSessionID)
			}
		}
		if base == nil || !reflect.DeepEqual(args[:len(base)], base) {
			t.Fatalf("args %q for agent %q", args, req.Agent)
		}
		for _, a := range args[len(base):] {
			if a != "--started-by" && a != "daemon" && !(strings.HasPrefix(a, "--permission-mode=") && req.ResumeSessionID == "") && !strings.HasPrefix(a, "--initial-prompt=") {
				t.Fatalf("argument %q", a)
			}
		}
	})
}

// Without systemctl, Install writes the unit and the environment file,
// runs nothing and says what to run; a second install keeps the
// environment file the user filled.
func TestInstallWithoutSystemctl(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // an empty folder: no systemctl
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	u, err := NewUnit(UnitOptions{Home: h, Executable: "/opt/happy", Getenv: func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfg}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	run := "systemctl not found; to start the daemon with systemd run: systemctl --user daemon-reload && systemctl --user enable --now " + u.Name
	want := []Step{{What: "wrote " + u.Path}, {What: "wrote " + u.EnvFile + " (the daemon's environment: add an agent's API key there)"}, {What: run}}
	if got := Install(u); !reflect.DeepEqual(got, want) {
		t.Fatalf("Install = %+v\nwant %+v", got, want)
	}
	if b, err := os.ReadFile(u.Path); err != nil || string(b) != u.Text {
		t.Fatalf("unit file %q %v", b, err)
	}
	if b, err := os.ReadFile(u.EnvFile); err != nil || string(b) != envFileText {
		t.Fatalf("environment file %q %v", b, err)
	}
	if fi, err := os.Stat(u.EnvFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("environment file mode %v %v", fi, err)
	}
	if err := os.WriteFile(u.EnvFile, []byte("ANTHROPIC_API_KEY=k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want[1] = Step{What: "kept " + u.EnvFile + " (the daemon's environment)"}
	if got := Install(u); !reflect.DeepEqual(got, want) {
		t.Fatalf("second Install = %+v\nwant %+v", got, want)
	}
	if b, _ := os.ReadFile(u.EnvFile); string(b) != "ANTHROPIC_API_KEY=k\n" {
		t.Fatalf("the filled environment file was overwritten: %q", b)
	}
}

package app

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOrdersGlobalThenProject(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	write(t, filepath.Join(home, "config.json"), `{"permission":[{"permission":"bash","pattern":"*","action":"ask"}],"other":1}`)
	write(t, filepath.Join(proj, ".happy", "config.json"), `{"permission":[{"permission":"bash","pattern":"git *","action":"allow"},{"permission":"edit","pattern":"secrets/**","action":"deny"}]}`)
	got, err := LoadRules(home, proj)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapper.PermissionRule{
		{Permission: "bash", Pattern: "*", Action: mapper.ActionAsk},
		{Permission: "bash", Pattern: "git *", Action: mapper.ActionAllow},
		{Permission: "edit", Pattern: "secrets/**", Action: mapper.ActionDeny},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rules %+v", got)
	}
	if r, err := LoadRules(t.TempDir(), t.TempDir()); err != nil || len(r) != 0 {
		t.Fatalf("no files: %v %v", r, err)
	}
}

func TestLoadRefusesBadRules(t *testing.T) {
	for _, body := range []string{
		`{"permission":[{"permission":"bash","pattern":"*","action":"Allow"}]}`,
		`{"permission":[{"permission":"bash","pattern":"*","action":"yes"}]}`,
		`{"permission":[{"permission":"","pattern":"*","action":"allow"}]}`,
		`{"permission":[{"permission":"bash","action":"allow"}]}`,
		`{"permission":{"permission":"bash"}}`,
		`not json`,
	} {
		home := t.TempDir()
		write(t, filepath.Join(home, "config.json"), body)
		_, err := LoadRules(home, t.TempDir())
		if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: err %v", body, err)
		}
	}
}

func TestParseRuleFlag(t *testing.T) {
	r, err := ParseRuleFlag("bash:git status*", mapper.ActionAllow)
	if err != nil || r != (mapper.PermissionRule{Permission: "bash", Pattern: "git status*", Action: mapper.ActionAllow}) {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = ParseRuleFlag("mcp:github/*:*", mapper.ActionAllow)
	if err != nil || r != (mapper.PermissionRule{Permission: "mcp:github/*", Pattern: "*", Action: mapper.ActionAllow}) {
		t.Fatalf("mcp rule: %+v %v", r, err)
	}
	for _, s := range []string{"bash", ":x", "bash:", "mcp:github/search"} {
		if _, err := ParseRuleFlag(s, mapper.ActionDeny); !errors.Is(err, ErrInvalidRules) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

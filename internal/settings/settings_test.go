package settings

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestParseKeepsUnknownKeys(t *testing.T) {
	in := []byte(`{"onboardingCompleted":true,"machineId":"m-1","serverUrl":"http://h:1","profiles":[{"a":1}]}`)
	s, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.ServerURL != "http://h:1" || s.MachineID != "m-1" {
		t.Fatalf("got %+v", s)
	}
	s.ServerURL = ""
	s.MachineID = "m-2"
	out, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"machineId\": \"m-2\",\n  \"onboardingCompleted\": true,\n  \"profiles\": [\n    {\n      \"a\": 1\n    }\n  ]\n}\n"
	if string(out) != want {
		t.Fatalf("marshal:\n%s\nwant:\n%s", out, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
		want     Settings
	}{
		{name: "empty", in: "", ok: true},
		{name: "spaces", in: " \n", ok: true},
		{name: "empty object", in: "{}", ok: true},
		{name: "null values", in: `{"serverUrl":null,"machineId":null}`, ok: true},
		{name: "array", in: "[]"},
		{name: "null", in: "null"},
		{name: "number url", in: `{"serverUrl":3}`},
		{name: "object id", in: `{"machineId":{}}`},
		{name: "truncated", in: `{"serverUrl":"x"`},
		{name: "both", in: `{"serverUrl":"u","machineId":"m"}`, ok: true, want: Settings{ServerURL: "u", MachineID: "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.in))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if s.ServerURL != tc.want.ServerURL || s.MachineID != tc.want.MachineID {
					t.Fatalf("got %+v want %+v", s, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestLoadMissingAndSaveAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	path := filepath.Join(dir, "settings.json")
	s, err := Load(path)
	if err != nil || s.ServerURL != "" || s.MachineID != "" {
		t.Fatalf("missing file: %+v %v", s, err)
	}
	s.ServerURL = "https://relay.example:8443"
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
	got, err := Load(path)
	if err != nil || got.ServerURL != "https://relay.example:8443" {
		t.Fatalf("reload: %+v %v", got, err)
	}
}

func TestLoadMalformedFileNamesPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte("{nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
}

func TestEnsureMachineIDStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"onboardingCompleted":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	id1, err := EnsureMachineID(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id1) {
		t.Fatalf("not a v4 uuid: %q", id1)
	}
	id2, err := EnsureMachineID(path)
	if err != nil || id2 != id1 {
		t.Fatalf("second call: %q %v", id2, err)
	}
	b, _ := os.ReadFile(path)
	want := "{\n  \"machineId\": \"" + id1 + "\",\n  \"onboardingCompleted\": false\n}\n"
	if string(b) != want {
		t.Fatalf("file:\n%s", b)
	}
}

func TestServerURLPrecedence(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvServerURL {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name     string
		env      string
		setting  string
		want     string
		src      Source
		wantErr  bool
		errorSrc Source
	}{
		{name: "default", want: "http://127.0.0.1:3005", src: SourceDefault},
		{name: "settings", setting: "https://relay.test/", want: "https://relay.test", src: SourceSettings},
		{name: "env wins", env: "http://10.0.0.1:9", setting: "https://relay.test", want: "http://10.0.0.1:9", src: SourceEnv},
		{name: "bad env is not replaced", env: "ftp://x", setting: "https://relay.test", wantErr: true, errorSrc: SourceEnv},
		{name: "bad setting is not replaced", setting: "relay.test:80", wantErr: true, errorSrc: SourceSettings},
		{name: "path kept", env: "https://h/api//", want: "https://h/api", src: SourceEnv},
		{name: "query refused", env: "https://h/?a=1", wantErr: true, errorSrc: SourceEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := ServerURL(env(tc.env), Settings{ServerURL: tc.setting})
			if tc.wantErr {
				if !errors.Is(err, ErrBadServerURL) || src != tc.errorSrc {
					t.Fatalf("got %q %q %v", got, src, err)
				}
				return
			}
			if err != nil || got != tc.want || src != tc.src {
				t.Fatalf("got %q %q %v, want %q %q", got, src, err, tc.want, tc.src)
			}
		})
	}
}

// HAPPY_EMBEDDED_URL moves the embedded relay; it is still the default
// source, and a configured relay wins over it.
func TestEmbeddedURL(t *testing.T) {
	env := map[string]string{EnvEmbeddedURL: "http://127.0.0.1:4005/"}
	got, src, err := ServerURL(func(k string) string { return env[k] }, Settings{})
	if err != nil || got != "http://127.0.0.1:4005" || src != SourceDefault {
		t.Fatalf("embedded URL: %q %q %v", got, src, err)
	}
	got, src, err = ServerURL(func(k string) string { return env[k] }, Settings{ServerURL: "https://relay.test"})
	if err != nil || got != "https://relay.test" || src != SourceSettings {
		t.Fatalf("with a setting: %q %q %v", got, src, err)
	}
}

func TestTrustedWebRelay(t *testing.T) {
	for _, tc := range []struct {
		file, want string
		err        error
	}{
		{`{}`, "", nil},
		{`{"trustedWebRelay":null}`, "", nil},
		{`{"trustedWebRelay":"https://relay.example/"}`, "https://relay.example", nil},
		{`{"trustedWebRelay":true}`, "", ErrMalformed},
		{`{"trustedWebRelay":"relay.example"}`, "", ErrBadServerURL},
	} {
		s, err := Parse([]byte(tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.TrustedWebRelay()
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.file, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"serverUrl":"http://a","machineId":"b","x":[1]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"serverUrl":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Parse(out)
		if err != nil || s2.ServerURL != s.ServerURL || s2.MachineID != s.MachineID {
			t.Fatalf("round trip: %+v vs %+v (%v)", s, s2, err)
		}
	})
}

func TestRemoteShell(t *testing.T) {
	for _, c := range []struct {
		name, env, file string
		want            bool
		err             bool
	}{
		{"default off", "", `{}`, false, false},
		{"setting on", "", `{"remoteShell": true}`, true, false},
		{"setting off", "", `{"remoteShell": false}`, false, false},
		{"setting null", "", `{"remoteShell": null}`, false, false},
		{"env wins", "0", `{"remoteShell": true}`, false, false},
		{"env on", "yes", `{}`, true, false},
		{"bad env", "maybe", `{"remoteShell": true}`, false, true},
		{"bad setting", "", `{"remoteShell": "yes"}`, false, true},
	} {
		s, err := Parse([]byte(c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := RemoteShell(func(k string) string {
			if k == EnvRemoteShell {
				return c.env
			}
			return ""
		}, s)
		if got != c.want || (err != nil) != c.err || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("%s: %v, %v", c.name, got, err)
		}
	}
}

package arch_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReleaseLdflagsMatchMakefile: a release binary is linked as `make
// build` links one, only the version differs (.goreleaser.yaml, Makefile).
func TestReleaseLdflagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	gr, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^LDFLAGS\s*:=\s*(.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no LDFLAGS")
	}
	want := strings.Replace(string(m[1]), "$(VERSION)", "{{ .Version }}", 1)
	if !strings.Contains(string(gr), "      - "+want+"\n") {
		t.Errorf(".goreleaser.yaml ldflags are not the Makefile's %q with {{ .Version }}", want)
	}
	for _, line := range []string{"      - CGO_ENABLED=0\n", "      - -trimpath\n"} {
		if !strings.Contains(string(gr), line) {
			t.Errorf(".goreleaser.yaml lacks %q", strings.TrimSpace(line))
		}
	}
}

// TestDockerfileInstructions: the relay image is the static binary alone,
// run by a non-root user with its data in a volume, and nothing is pulled
// or run at build time (docs/deploy.md, "The relay as a container image").
func TestDockerfileInstructions(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			t.Fatalf("Dockerfile: continued line %q (keep one instruction a line)", line)
		}
		got = append(got, line)
	}
	want := []string{
		"FROM scratch",
		"ARG TARGETARCH",
		"COPY dist/happy_linux_${TARGETARCH}_*/happy /usr/local/bin/happy",
		"ENV HAPPY_HOME_DIR=/data",
		"USER 65532:65532",
		"WORKDIR /data",
		"VOLUME /data",
		"EXPOSE 3005",
		`ENTRYPOINT ["/usr/local/bin/happy"]`,
		`CMD ["server", "--listen", "0.0.0.0:3005"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Dockerfile instructions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ignore), "\n*\n!dist/happy_linux_*/happy\n") {
		t.Errorf(".dockerignore does not limit the build context to the Linux binaries:\n%s", ignore)
	}
}

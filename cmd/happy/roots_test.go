package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestFallbackRootsWithoutSystemStore runs this test binary again with an
// empty system certificate store (what the relay's image FROM scratch has)
// and checks that a public root CA (Let's Encrypt's ISRG Root X1, which
// ACME, push services and relays chain to) still verifies: happy carries
// fallback roots for that case.
func TestFallbackRootsWithoutSystemStore(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SSL_CERT_FILE and SSL_CERT_DIR choose the store on Linux only")
	}
	if os.Getenv("HAPPY_TEST_ROOTS_CHILD") == "1" {
		verifyISRGRoot(t)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestFallbackRootsWithoutSystemStore$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "HAPPY_TEST_ROOTS_CHILD=1", "SSL_CERT_FILE="+empty, "SSL_CERT_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFallbackRootsWithoutSystemStore") {
		t.Fatalf("with an empty system store: %v\n%s", err, out)
	}
}

// verifyISRGRoot verifies testdata/isrg-root-x1.pem against the roots Go
// uses when none are given.
func verifyISRGRoot(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "isrg-root-x1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatal("testdata/isrg-root-x1.pem: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{}); err != nil {
		t.Fatalf("ISRG Root X1 does not verify: %v", err)
	}
}

package buildinfo

import "testing"

func TestResolve(t *testing.T) {
	cases := []struct {
		name, stamped, module, want string
	}{
		{"release build stamps the tag's version", "1.2.3", "v1.2.3", "1.2.3"},
		{"make build stamps git describe", "v1.2.3-4-gabcdef0", "(devel)", "v1.2.3-4-gabcdef0"},
		{"go install module@v1.2.3", "dev", "v1.2.3", "1.2.3"},
		{"go install module@latest of a pre-release", "dev", "v1.3.0-rc.1", "1.3.0-rc.1"},
		{"go build in a clone (VCS pseudo-version)", "dev", "v0.0.0-20261207194500-79d0769a1b2c+dirty", "0.0.0-20261207194500-79d0769a1b2c+dirty"},
		{"go build without VCS information", "dev", "(devel)", "dev"},
		{"test binary", "dev", "", "dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.stamped, tc.module); got != tc.want {
				t.Errorf("resolve(%q, %q) = %q, want %q", tc.stamped, tc.module, got, tc.want)
			}
		})
	}
}

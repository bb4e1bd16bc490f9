//go:build unix

package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/internal/buildinfo"
)

// newVersionCmd builds `happy version`: the version plus the Go toolchain and
// platform, for bug reports. `happy --version` prints the short form.
func newVersionCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of happy and its platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(f.stdout, "happy %s (%s, %s/%s)\n", buildinfo.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

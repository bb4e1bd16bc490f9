//go:build unix

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/internal/embedded"
)

// newServerStopCmd builds `happy server stop`: it stops the local relay that
// happy started in the background (docs/ARCHITECTURE.md "Relay default").
func newServerStopCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the local relay happy started in the background",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return err
			}
			stopped, err := embedded.Stop(h, 5*time.Second)
			if err != nil {
				return err
			}
			if stopped {
				fmt.Fprintln(f.stdout, "stopped the local relay")
			} else {
				fmt.Fprintln(f.stdout, "no local relay was running")
			}
			return nil
		},
	}
}

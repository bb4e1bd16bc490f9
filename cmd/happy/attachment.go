//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
)

func newAttachmentCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attachment",
		Short: "Read the attachments of a session (files and images, encrypted on the relay)",
	}
	var out string
	get := &cobra.Command{
		Use:   "get SESSION REF -o FILE",
		Short: "Download and decrypt one attachment (REF as happy log shows it)",
		Long: `Download the attachment REF of SESSION (sessions/<id>/attachments/<file>, as
happy log shows it), decrypt it with the session's key, check it against the
message that references it (its SHA-256, so a blob replaced on the relay is
refused) and write it to FILE ("-" for standard output). An existing FILE is
not overwritten.`,
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: completeSessions(f, false, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{err: errors.New("-o FILE is required (- for standard output)")}
			}
			return withSession(cmd, f, "attachment", args[0], func(conn *app.Conn, o app.Opened) error {
				data, checked, err := app.GetAttachment(cmd.Context(), conn, o, args[1])
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				if !checked {
					fmt.Fprintf(f.stderr, "warning: no message of the session references %s yet, so its bytes are not checked\n", args[1])
				}
				if out == "-" {
					_, err = f.stdout.Write(data)
					return err
				}
				file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				if _, err := file.Write(data); err != nil {
					_ = file.Close()
					return &exitError{code: exitFailed, err: err}
				}
				if err := file.Close(); err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				fmt.Fprintf(f.stderr, "wrote %s (%d bytes)\n", out, len(data))
				return nil
			})
		},
	}
	get.Flags().StringVarP(&out, "output", "o", "", "the file to write (- for standard output)")
	cmd.AddCommand(get)
	return cmd
}

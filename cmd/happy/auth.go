//go:build unix

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
)

// newAuthCmd builds `happy auth`: login (pairing, new account, backup key),
// backup, status and logout. The relay is chosen as everywhere else
// (HAPPY_SERVER_URL, serverUrl in settings.json, the embedded default) and
// never replaced by another one.
func newAuthCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Log this machine in to a relay account, show its state, print the backup key, log out",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAuthLoginCmd(f), newAuthBackupCmd(f), newAuthStatusCmd(f), newAuthTokenCmd(f), newAuthLogoutCmd(f))
	return cmd
}

type authLoginOptions struct {
	newAccount bool
	backupKey  string
	timeout    time.Duration
}

func newAuthLoginCmd(f *factory) *cobra.Command {
	var o authLoginOptions
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Pair with an account on another device (QR code), or create / restore one",
		Long: `Log this machine in to an account on the relay.

Without flags, happy shows a QR code and a link: scan it with the happy app
(or approve it on another device of the account) and this machine is paired;
happy waits until the request is approved.

  --new-account      create a new account from a fresh secret, without any other
                     device, and print its backup key once
  --backup-key KEY   restore an account from its backup key (this machine can then
                     read and control every session of the account)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.newAccount && o.backupKey != "" {
				return &usageError{err: errors.New("--new-account and --backup-key exclude each other")}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAuthLogin(ctx, f, o)
		},
	}
	cmd.Flags().BoolVar(&o.newAccount, "new-account", false, "create a new account and print its backup key")
	cmd.Flags().StringVar(&o.backupKey, "backup-key", "", "restore the account with this backup key")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the pairing to be approved")
	return cmd
}

func runAuthLogin(ctx context.Context, f *factory, o authLoginOptions) error {
	h, err := f.home()
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if creds, err := crypto.LoadCredentials(h.AccessKey()); err == nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("already logged in (account %s); run happy auth logout first", relay.AccountID(creds))}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w (remove %s or run happy auth logout)", err, h.AccessKey())}
	}
	var secret [32]byte
	if o.backupKey != "" {
		if secret, err = crypto.ParseBackupKey(o.backupKey); err != nil {
			return &usageError{err: fmt.Errorf("--backup-key: %w", err)}
		}
	}
	log, _ := f.log("auth")
	env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Stderr: f.stderr, Now: f.now}
	url, _, err := app.ResolveURL(ctx, env)
	if err != nil {
		return &exitError{code: exitRelay, err: err}
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url, ClientName: app.ClientName()})
	if err != nil {
		return &exitError{code: exitRelay, err: err}
	}
	defer api.CloseIdleConnections()
	if err := h.Ensure(); err != nil {
		return &exitError{code: exitFailed, err: err}
	}

	var creds *crypto.Credentials
	switch {
	case o.newAccount:
		if _, err := rand.Read(secret[:]); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("new account secret: %w", err)}
		}
		fallthrough
	case o.backupKey != "":
		creds, err = relay.CreateAccount(ctx, api, secret)
		if err != nil {
			return &exitError{code: exitRelay, err: err}
		}
	default:
		creds, err = pairTerminal(ctx, f.stdout, api, o.timeout)
		if err != nil {
			return &exitError{code: exitRelay, err: err}
		}
	}
	if err := creds.Save(h.AccessKey()); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	log.Info().Str("url", url).Str("account", relay.AccountID(creds)).Str("variant", creds.Variant.String()).Msg("logged in")
	switch {
	case o.newAccount:
		fmt.Fprintf(f.stdout, "Created account %s on %s.\n\n", relay.AccountID(creds), url)
		fmt.Fprintf(f.stdout, "Backup key (write it down and keep it safe: it restores the account and\ndecrypts every session; `happy auth backup` shows it again on this machine):\n\n    %s\n\n", crypto.FormatBackupKey(secret))
		fmt.Fprintln(f.stdout, "Restore it on another machine with: happy auth login --backup-key KEY")
	case o.backupKey != "":
		fmt.Fprintf(f.stdout, "Restored account %s on %s.\n", relay.AccountID(creds), url)
	default:
		fmt.Fprintf(f.stdout, "Paired with account %s on %s.\n", relay.AccountID(creds), url)
	}
	return nil
}

// pairTerminal shows the pairing QR code and link and waits for approval.
func pairTerminal(ctx context.Context, w io.Writer, api *relay.API, timeout time.Duration) (*crypto.Credentials, error) {
	req, err := relay.NewPairingRequest()
	if err != nil {
		return nil, err
	}
	link := req.AppLink()
	fmt.Fprintln(w, "Scan this code with the happy app on a device logged in to your account:")
	fmt.Fprintln(w)
	qrterminal.GenerateWithConfig(link, qrterminal.Config{
		Level: qrterminal.L, Writer: w, HalfBlocks: true, QuietZone: 1,
		BlackChar: qrterminal.BLACK_BLACK, WhiteBlackChar: qrterminal.WHITE_BLACK,
		WhiteChar: qrterminal.WHITE_WHITE, BlackWhiteChar: qrterminal.BLACK_WHITE,
	})
	fmt.Fprintln(w)
	fmt.Fprintf(w, "or open this link on that device:\n\n    %s\n\nWaiting for approval (up to %s)…\n", link, timeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return req.WaitApproved(wctx, api, relay.DefaultPairPoll)
}

// newAuthTokenCmd builds `happy auth token`: the bearer token this machine
// sends to the relay, for calling the relay's HTTP routes by hand (curl -H
// "Authorization: Bearer $(happy auth token)"). It grants the account's
// relay access (not its keys: the content stays encrypted).
func newAuthTokenCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print the relay bearer token of this machine (for curl against the relay's routes)",
		Long: `Print the bearer token this machine sends to the relay, e.g. to read a session's
message stream by hand:

  curl -N -H "Authorization: Bearer $(happy auth token)" "$HAPPY_SERVER_URL/v3/sessions/SESSION/messages/stream"

Anyone with the token can use the relay as this account (list, delete, send
ciphertext) until it is revoked; it does not decrypt anything.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			creds, err := loadCreds(h)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(f.stdout, creds.Token)
			return err
		},
	}
}

func newAuthBackupCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "backup",
		Short: "Print the account's backup key (only on a machine that holds the account secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			creds, err := loadCreds(h)
			if err != nil {
				return err
			}
			if creds.AccountSecret == nil {
				return &exitError{code: exitFailed, err: errors.New("this machine was paired through another device and does not hold the account secret; print the backup key on the device that created the account")}
			}
			_, err = fmt.Fprintf(f.stdout, "%s\n", crypto.FormatBackupKey(*creds.AccountSecret))
			return err
		},
	}
}

func newAuthStatusCmd(f *factory) *cobra.Command {
	var offline bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the account, relay and keys of this machine (exit 1 when logged out)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuthStatus(cmd.Context(), f, offline)
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "do not ask the relay whether it accepts the token")
	return cmd
}

func runAuthStatus(ctx context.Context, f *factory, offline bool) error {
	h, err := f.home()
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	st, err := settings.Load(h.Settings())
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	url, src, urlErr := settings.ServerURL(f.getenv, st)
	creds, err := loadCreds(h)
	if err != nil {
		if urlErr == nil {
			fmt.Fprintf(f.stdout, "Relay:    %s (%s)\n", url, sourceText(src))
		}
		return err
	}
	w := f.stdout
	fmt.Fprintln(w, "Logged in.")
	fmt.Fprintf(w, "Account:  %s\n", relay.AccountID(creds))
	if urlErr != nil {
		fmt.Fprintf(w, "Relay:    unusable: %v\n", urlErr)
		return &exitError{code: exitRelay}
	}
	fmt.Fprintf(w, "Relay:    %s (%s)\n", url, sourceText(src))
	keys := creds.Variant.String()
	if creds.AccountSecret != nil {
		keys += ", holds the account secret (reads every session; happy auth backup works)"
	} else {
		keys += ", paired (reads the sessions this machine writes)"
	}
	fmt.Fprintf(w, "Keys:     %s\n", keys)
	if offline {
		return nil
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url, Token: creds.Token, ClientName: app.ClientName(), RequestTimeout: 5 * time.Second})
	if err != nil {
		return &exitError{code: exitRelay, err: err}
	}
	defer api.CloseIdleConnections()
	_, err = api.ListSessions(ctx)
	switch {
	case err == nil:
		fmt.Fprintln(w, "Token:    accepted by the relay")
	case errors.Is(err, relay.ErrUnauthorized):
		fmt.Fprintln(w, "Token:    REFUSED by the relay; run happy auth logout, then happy auth login")
		return &exitError{code: exitFailed}
	default:
		fmt.Fprintf(w, "Token:    not checked, the relay did not answer (%v)\n", err)
	}
	return nil
}

func sourceText(s settings.Source) string {
	switch s {
	case settings.SourceEnv:
		return "from " + settings.EnvServerURL
	case settings.SourceSettings:
		return "from serverUrl in settings.json"
	default:
		return "default: the embedded local relay"
	}
}

// loadCreds loads access.key; a missing file is "not logged in" (exit 1).
func loadCreds(h home.Dir) (*crypto.Credentials, error) {
	creds, err := crypto.LoadCredentials(h.AccessKey())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &exitError{code: exitFailed, err: errors.New("not logged in (run happy auth login)")}
	}
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	return creds, nil
}

func newAuthLogoutCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Remove this machine's credentials (access.key); messages not yet sent stay in the outbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			err = os.Remove(h.AccessKey())
			switch {
			case errors.Is(err, fs.ErrNotExist):
				_, err = fmt.Fprintln(f.stdout, "Not logged in.")
				return err
			case err != nil:
				return &exitError{code: exitFailed, err: fmt.Errorf("remove credentials: %w", err)}
			}
			_, err = fmt.Fprintln(f.stdout, "Logged out. Messages still in the outbox are sent after the next login to the same account.")
			return err
		},
	}
}

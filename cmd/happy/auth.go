//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/embedded"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
)

// newAuthCmd builds `happy auth`: login (pairing, new account, backup key),
// approve (another terminal's pairing), pair-browser, backup, status, token
// and logout. The relay is chosen as everywhere else
// (HAPPY_SERVER_URL, serverUrl in settings.json, the embedded default) and
// never replaced by another one.
func newAuthCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Log this machine in to a relay account, show its state, print the backup key, log out",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAuthLoginCmd(f), newAuthApproveCmd(f), newWebCmd(f, "pair-browser"), newAuthBackupCmd(f), newAuthStatusCmd(f), newAuthTokenCmd(f), newAuthLogoutCmd(f))
	return cmd
}

type authLoginOptions struct {
	newAccount bool
	backupKey  string
	timeout    time.Duration
	// acceptUnproven takes an approval without proof of the pairing
	// secret (the reference app's) without asking.
	acceptUnproven bool
}

func newAuthLoginCmd(f *factory) *cobra.Command {
	var o authLoginOptions
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Pair with an account on another device (QR code), or create / restore one",
		Long: `Log this machine in to an account on the relay.

Without flags, happy shows a link and a pairing code, and a QR code when
the relay is https beyond this machine (a phone cannot reach this
machine's loopback address, nor pair safely over plain http): type

  happy auth approve XXXXX-XXXXX-SSSSS-SSSSS

on a machine already logged in to the account (or the code in the web
app's Devices page), or scan the QR code with the happy app, and this
machine is paired; happy waits until the request is approved. The first
half of the code is a fingerprint of this machine's key: the approving
machine checks it itself, so the relay cannot slip its own key in. The
second half is a secret that never reaches the relay: the approval
carries a proof of it, so this machine knows the approval comes from
someone who saw its screen, not from the relay or another account.

The happy app's approval (the QR code) cannot carry that proof. Such an
approval is not taken silently: on a terminal happy shows the account and
asks you to confirm it is yours; otherwise it is refused unless
--accept-unproven is given.

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
	cmd.Flags().BoolVar(&o.acceptUnproven, "accept-unproven", false, "take an approval without proof of the pairing code (the happy app's) without asking")
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
		creds, err = pairTerminal(ctx, f, api, o)
		if err != nil {
			log.Warn().Err(err).Str("url", url).Msg("pairing not taken")
		}
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			return ee
		case err != nil:
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

// pairTerminal shows the pairing QR code, links and full code and waits
// for approval. An approval that proves the pairing secret pairs; one with
// a wrong proof is refused; one without proof goes to confirmUnproven.
func pairTerminal(ctx context.Context, f *factory, api *relay.API, o authLoginOptions) (*crypto.Credentials, error) {
	req, err := relay.NewPairingRequest()
	if err != nil {
		return nil, err
	}
	// Open the request before showing it, so the code works the moment it
	// is shown (and a relay that is down fails at once).
	if _, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil {
		return nil, fmt.Errorf("relay: open pairing request: %w", err)
	}
	printTerminalPairing(f.stdout, api.BaseURL(), req.AppLink(), req.ApproveLink(), req.FullCode(), o.timeout)
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	creds, err := req.WaitApproved(wctx, api, relay.DefaultPairPoll, func(c *crypto.Credentials) error {
		return confirmUnproven(ctx, f, relay.AccountID(c), o.acceptUnproven)
	})
	if errors.Is(err, relay.ErrWrongPairingProof) {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("%w; nothing was saved: run happy auth login again", err)}
	}
	return creds, err
}

// confirmUnproven decides on an approval of account that carries no proof
// of the pairing secret (the happy app's, or one the relay or another
// account made): taken with --accept-unproven (saying so), asked [y/N] when
// stdin is a terminal (anything but y or yes, or the end of the input, is
// no), refused otherwise. The error (an *exitError, exit 1) says what
// happened; nothing is saved.
func confirmUnproven(ctx context.Context, f *factory, account string, accept bool) error {
	what := "Account " + account + " answered this terminal's pairing request without proof that it saw the full pairing code"
	if accept {
		fmt.Fprintf(f.stdout, "%s; taken as yours (--accept-unproven).\n", what)
		return nil
	}
	if !f.isTerminal(f.stdin) {
		return &exitError{code: exitFailed, err: fmt.Errorf("refused: account %s answered this terminal's pairing request without proof that it saw the full pairing code (the reference app, or a relay or another account answering in its place); nothing was saved. Run happy auth login again and approve with the full code, or pass --accept-unproven if you approved from the reference app and this is your account", account)}
	}
	fmt.Fprintf(f.stdout, "%s.\nThe happy app approves this way; so could the relay or another account that saw the code.\nIs %s your account (happy auth status on the approving device shows it)? [y/N] ", what, account)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(f.stdin).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		if a == "y" || a == "yes" {
			return nil
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("not paired: account %s was not confirmed; nothing was saved (run happy auth login again)", account)}
	case <-ctx.Done():
		fmt.Fprintln(f.stdout)
		return &exitError{code: exitFailed, err: fmt.Errorf("not paired: interrupted before account %s was confirmed; nothing was saved", account)}
	}
}

// showQR draws text as a QR code for a terminal (half blocks, low error
// correction: the smallest code a phone camera reads off a screen).
func showQR(w io.Writer, text string) {
	qrterminal.GenerateWithConfig(text, qrterminal.Config{
		Level: qrterminal.L, Writer: w, HalfBlocks: true, QuietZone: 1,
		BlackChar: qrterminal.BLACK_BLACK, WhiteBlackChar: qrterminal.WHITE_BLACK,
		WhiteChar: qrterminal.WHITE_WHITE, BlackWhiteChar: qrterminal.BLACK_WHITE,
	})
}

// accountAPI loads this home's credentials and returns them with a relay
// client for the configured relay (or relayURL when set) carrying the
// token. needSecret refuses a machine that does not hold the account
// secret, naming what for.
func accountAPI(ctx context.Context, f *factory, relayURL, needSecret string) (*crypto.Credentials, *relay.API, string, error) {
	h, err := f.home()
	if err != nil {
		return nil, nil, "", &exitError{code: exitFailed, err: err}
	}
	creds, err := loadCreds(h)
	if err != nil {
		return nil, nil, "", err
	}
	if needSecret != "" && creds.AccountSecret == nil {
		return nil, nil, "", &exitError{code: exitFailed, err: fmt.Errorf("this machine was paired through another device and does not hold the account secret, which %s needs; run it on the machine that created the account (or one restored with happy auth login --backup-key)", needSecret)}
	}
	url := relayURL
	if url == "" {
		log, _ := f.log("auth")
		env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Stderr: f.stderr, Now: f.now}
		if url, _, err = app.ResolveURL(ctx, env); err != nil {
			return nil, nil, "", &exitError{code: exitRelay, err: err}
		}
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url, Token: creds.Token, ClientName: app.ClientName()})
	if err != nil {
		return nil, nil, "", &exitError{code: exitRelay, err: err}
	}
	return creds, api, url, nil
}

// newAuthApproveCmd builds `happy auth approve CODE|LINK|KEY`: this
// machine (holding the account secret) answers another terminal's pairing
// request.
func newAuthApproveCmd(f *factory) *cobra.Command {
	var legacy bool
	cmd := &cobra.Command{
		Use:   "approve CODE|LINK|KEY",
		Short: "Approve another terminal's happy auth login by its pairing code (or link, or key)",
		Long: `Approve the pairing request of a terminal that runs happy auth login, from
this machine (which must hold the account secret):

  happy auth approve XXXXX-XXXXX-SSSSS-SSSSS  the full code it shows
  happy auth approve 'happy://terminal?…'     or its link, or its bare key
  happy auth approve -- -KEY…                 (a bare key may start with -)

With a code, happy asks the relay for the open request whose key has the
code's first half and checks the key's code itself before answering, so a
relay cannot substitute its own key. The second half never leaves this
machine: the answer carries a proof of it, which tells the terminal the
approval comes from someone who saw its screen. The first half alone is
refused. Only happy's own relay can look a code up; on the reference relay
pass the link instead (the one with &secret=; a link or key without it
makes the terminal ask its person to confirm the account).

The terminal gets the dataKey answer (it reads the sessions it writes);
--legacy gives it the account secret (it reads every session of the account).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuthApprove(cmd.Context(), f, args[0], legacy)
		},
	}
	cmd.Flags().BoolVar(&legacy, "legacy", false, "give the terminal the account secret (it can then read every session)")
	return cmd
}

func runAuthApprove(ctx context.Context, f *factory, arg string, legacy bool) error {
	code, secret, codeErr := crypto.ParseFullPairingCode(arg)
	if codeErr == nil && secret == "" {
		return &usageError{err: fmt.Errorf("%s is only the first half of the pairing code: type the full code that happy auth login shows, %s-SSSSS-SSSSS (its second half proves to the terminal that the approval comes from someone who sees its screen)", code, code)}
	}
	var key [32]byte
	if codeErr != nil {
		var keyErr error
		if key, secret, keyErr = relay.ParseTerminalLink(arg); keyErr != nil {
			return &usageError{err: fmt.Errorf("%q is neither a pairing code (XXXXX-XXXXX-SSSSS-SSSSS) nor a terminal link or key", cutText(arg, 60))}
		}
	}
	creds, api, url, err := accountAPI(ctx, f, "", "approving a terminal")
	if err != nil {
		return err
	}
	defer api.CloseIdleConnections()
	if codeErr == nil {
		key, err = relay.ApproveByCode(ctx, api, creds, arg, legacy)
		switch {
		case errors.Is(err, relay.ErrRouteUnsupported):
			return &exitError{code: exitRelay, err: fmt.Errorf("the relay %s cannot look up pairing codes (only happy's own relay can); approve with the link that happy auth login shows: happy auth approve 'happy://terminal?…'", url)}
		case errors.Is(err, relay.ErrNoPendingPairing):
			return &exitError{code: exitFailed, err: fmt.Errorf("no terminal is waiting with code %s on %s (mistyped, expired, or approved already; happy auth login shows a new code when restarted)", code, url)}
		case errors.Is(err, relay.ErrLegacyOnly):
			return &exitError{code: exitFailed, err: fmt.Errorf("refused: the terminal with code %s says it takes only the account secret (an older client, or the relay %s changed its answer); nothing was sent. Approve with --legacy only if you trust both: it then reads every session of the account", code, url)}
		case errors.Is(err, relay.ErrFingerprint):
			return &exitError{code: exitRelay, err: fmt.Errorf("refused: %w (the relay %s may be trying to pair its own key)", err, url)}
		case err != nil:
			return &exitError{code: exitRelay, err: err}
		}
	} else {
		st, err := api.AuthRequestStatus(ctx, key[:])
		if err != nil {
			return &exitError{code: exitRelay, err: err}
		}
		if st != "pending" {
			return &exitError{code: exitFailed, err: fmt.Errorf("no terminal is waiting with this key on %s (relay says %q: expired, or approved already)", url, st)}
		}
		if err := relay.ApproveTerminal(ctx, api, creds, key, secret, legacy); err != nil {
			return &exitError{code: exitRelay, err: err}
		}
	}
	what := "dataKey: it reads the sessions it writes"
	if legacy {
		what = "legacy: it holds the account secret and reads every session"
	}
	if _, err := fmt.Fprintf(f.stdout, "Approved the terminal with code %s for account %s on %s (%s).\n", crypto.PairingCode(key), relay.AccountID(creds), url, what); err != nil {
		return err
	}
	if secret == "" {
		_, err = fmt.Fprintf(f.stdout, "The link or key carries no pairing secret, so the approval proves nothing to the terminal: it shows account %s and asks its person to confirm it.\n", relay.AccountID(creds))
	}
	return err
}

// cutText returns at most n bytes of s, with "…" when it was longer.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
	if src == settings.SourceDefault {
		// The token goes only to this home's own relay.
		switch err := embedded.Verify(ctx, h, url); {
		case errors.Is(err, embedded.ErrNotOurs):
			fmt.Fprintln(w, "Token:    not sent: the program at the embedded relay's address is not this home's relay")
			return &exitError{code: exitRelay, err: err}
		case err != nil:
			fmt.Fprintf(w, "Token:    not checked, the relay did not answer (%v)\n", err)
			return nil
		}
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
	var revoke bool
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Remove this machine's credentials (access.key); messages not yet sent stay in the outbox",
		Long: `Remove this machine's credentials (access.key). Messages not yet sent stay in
the outbox and are sent after the next login to the same account.

--revoke first asks the relay to revoke every token of the account: this
machine's, and those of every other machine and browser logged in to it,
which must then log in again (a leaked token is useless from then on). Only
happy's own relay can revoke tokens; the reference relay has no revocation
(its tokens stay valid for ever), and then nothing is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if revoke {
				if err := revokeTokens(cmd.Context(), f); err != nil {
					return err
				}
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
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke every token of the account on the relay first (every device logs in again)")
	return cmd
}

// revokeTokens is the --revoke of happy auth logout.
func revokeTokens(ctx context.Context, f *factory) error {
	creds, api, url, err := accountAPI(ctx, f, "", "")
	if err != nil {
		return err
	}
	defer api.CloseIdleConnections()
	rv, err := api.RevokeTokens(ctx)
	switch {
	case errors.Is(err, relay.ErrRouteUnsupported):
		return &exitError{code: exitRelay, err: fmt.Errorf("the relay %s cannot revoke tokens (the reference relay has no revocation: its tokens stay valid); nothing was changed, run happy auth logout without --revoke to remove this machine's credentials only", url)}
	case err != nil:
		return &exitError{code: exitRelay, err: fmt.Errorf("revoke: %w (nothing was removed)", err)}
	}
	_, err = fmt.Fprintf(f.stdout, "Revoked every token of account %s on %s (token generation %d, %d connections closed): every machine and browser of the account must log in again.\n", relay.AccountID(creds), url, rv.Generation, rv.Disconnected)
	return err
}

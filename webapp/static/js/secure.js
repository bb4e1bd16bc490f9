// The page's secure context. Browsers give WebCrypto (crypto.subtle: the
// app's AES-GCM, HMAC and SHA-256) only to secure contexts: https pages and
// pages of the browser's own computer (localhost, 127.0.0.0/8). A page
// opened over plain http on a network address, as a phone sees a relay
// listening on the LAN, has no crypto.subtle, and every record would fail
// to decrypt one by one. The app checks once, at start, and says what to do
// instead (docs/ARCHITECTURE.md, "The web app").

// secureContextProblem returns null when env (globalThis in the app) can
// run the app, else {kind, title, text: [paragraphs]}: kind "insecure"
// (no secure context) or "no-webcrypto" (a secure context without
// crypto.subtle: an old or stripped-down browser). hadPairLink says the
// page was opened with a pairing link, which is then not used.
export function secureContextProblem(env, hadPairLink) {
  const loc = env.location ?? {};
  if (env.isSecureContext === false) {
    return {
      kind: "insecure",
      title: "This page cannot open your sessions",
      text: [
        `Your browser opened it over plain http at ${loc.host}, and browsers give WebCrypto (crypto.subtle), which this app decrypts with, only to https pages and to pages of their own computer. ` +
          "Nothing was sent to the relay" + (hadPairLink ? ", and the pairing link was not used (it expires within minutes)." : "."),
        "Open the app over https instead: on the computer that runs the relay, give it an https address (happy server --domain NAME with a domain of yours, " +
          "a tunnel such as Tailscale Serve or Cloudflare Tunnel, or an https reverse proxy: see \"From your phone\" in happy's README), then run happy web again and open its new link.",
        `On the relay's own computer, http://localhost${loc.port ? ":" + loc.port : ""}/ works as it is.`,
      ],
    };
  }
  if (!env.crypto?.subtle) {
    return {
      kind: "no-webcrypto",
      title: "This browser cannot open your sessions",
      text: ["It has no WebCrypto (crypto.subtle), which this app decrypts with. Open the app in a current Firefox, Chrome, Edge or Safari."],
    };
  }
  return null;
}

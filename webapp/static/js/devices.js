// The account's other devices, as the CLI's relay and daemon packages see
// them (docs/ARCHITECTURE.md, sections "Pairing", "The daemon" and "The web
// app"): approving a terminal's pairing request by its code or key,
// revoking every token, the machines and their daemon's spawn RPC. Every
// function takes the relay (api.js's Relay, or anything with the same
// methods) so tests can hand it a fake.

import * as c from "./crypto.js";
import { RelayError, RpcError, callRPC, routeMissing } from "./api.js";

/** ApproveError is a refusal of approveTerminal; nothing was sent to the
 * relay. reason is "fingerprint" (a key whose code is not the one typed),
 * "ambiguous", "not_found", "unsupported" (no code lookup on this relay),
 * "short_code" (the code's first half alone, which proves nothing to the
 * terminal) or "input" (neither a code nor a key). */
export class ApproveError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "ApproveError";
    this.reason = reason;
  }
}

/** approveTerminal approves the terminal that `happy auth login` shows
 * input for: its full pairing code XXXXX-XXXXX-SSSSS-SSSSS (any spelling
 * parseFullPairingCode takes) or its link or key. For a code it asks the
 * relay for the open requests of the code's first half and checks every
 * key's code itself, as relay.ApproveByCode does: a key whose code differs
 * is refused and nothing is sent; the first half alone is refused. It
 * seals the answer as relay.ApproveTerminal does (dataKey: the account's
 * content public key; legacy, when asked or when the terminal does not
 * take dataKey: the account secret), with the proof of the code's second
 * half (or of the link's &secret=), and posts it. It returns {publicKey,
 * code, variant, proven}: an unproven answer (a bare key or the app's
 * link) makes the terminal ask its person. Errors: ApproveError,
 * RelayError. */
export async function approveTerminal(relay, accountSecret, input, { legacy = false } = {}) {
  let code = null, secret = "";
  try { ({ code, secret } = c.parseFullPairingCode(input)); } catch { /* maybe a link or key */ }
  if (code && !secret) throw new ApproveError("short_code", `${code} is only the first half of the pairing code: type the full code happy auth login shows, ${code}-SSSSS-SSSSS`);
  let key, supportsV2;
  if (code) {
    let list;
    try {
      list = await relay.lookupPairing(code);
    } catch (e) {
      if (routeMissing(e)) throw new ApproveError("unsupported", "this relay cannot look up pairing codes; paste the link or key `happy auth login` shows instead");
      throw e;
    }
    if (list.length === 0) throw new ApproveError("not_found", `no open pairing request has the code ${code} (typed wrong, expired, or already approved)`);
    for (const q of list) {
      const got = await c.pairingCode(q.publicKey);
      if (got !== code) throw new ApproveError("fingerprint", `the relay answered code ${code} with a key whose code is ${got}: refused, nothing was sent`);
      if (key && c.hex(key) !== c.hex(q.publicKey)) throw new ApproveError("ambiguous", `the code ${code} names ${list.length} different open requests; paste the link instead`);
      key = q.publicKey;
      supportsV2 = q.supportsV2;
    }
  } else {
    try {
      ({ key, secret } = c.parseTerminalLink(input));
    } catch (e) {
      throw new ApproveError("input", `not a pairing code (XXXXX-XXXXX-SSSSS-SSSSS) nor a terminal link or key: ${e.message}`);
    }
    code = await c.pairingCode(key);
    const st = await relay.pairingStatus(key);
    if (st?.status !== "pending") throw new ApproveError("not_found", `no open pairing request for the key with code ${code} (${st?.status ?? "no status"})`);
    supportsV2 = st.supportsV2 === true;
  }
  // The relay says what the terminal takes: one that turned supportsV2
  // off would otherwise be handed the account secret unasked.
  if (!legacy && !supportsV2) throw new ApproveError("legacy_only", `the terminal with code ${code} says it takes only the account secret (an older client, or a relay that changed its answer): nothing was sent; approve it with full access only if you trust both`);
  const variant = legacy ? "legacy" : "dataKey";
  let resp = variant === "legacy" ? { variant, secret: accountSecret } : { variant, contentPublicKey: (await c.contentKeyPair(accountSecret)).publicKey };
  if (secret) resp = await c.provePairingResponse(resp, secret, key);
  await relay.authResponse(key, c.sealPairingResponse(resp, key));
  return { publicKey: key, code, variant, proven: !!secret };
}

/** revokeEverywhere asks the relay to revoke every token of the account
 * (POST /v1/auth/revoke). It returns {revoked: true, generation,
 * disconnected}, or {revoked: false, message} on a relay without the route
 * (and when the token was already refused, 401): the caller then signs
 * out of this browser only. Other errors are thrown (nothing is forgotten). */
export async function revokeEverywhere(relay) {
  try {
    return { revoked: true, ...(await relay.revoke()) };
  } catch (e) {
    if (routeMissing(e)) return { revoked: false, message: "This relay does not support revoking tokens; signed out of this browser only. Other devices stay signed in." };
    if (e instanceof RelayError && e.status === 401) return { revoked: false, message: "The relay no longer accepts this browser's token (revoked already?); signed out of this browser." };
    throw e;
  }
}

/** ONLINE_WITHIN is how recent a machine's activeAt must be for it to be
 * online, in ms (daemon.OnlineWithin; the heartbeat comes every 20 s); a
 * machine whose daemon state says "offline" is offline at once. */
export const ONLINE_WITHIN = 90_000;

/** openMachine decrypts one entry of GET /v1/machines with the machine's
 * key (its dataEncryptionKey unwrapped with the account's content key, or
 * the account secret for a legacy machine), as daemon.Machines does:
 * {id, host, platform, version, homeDir, happyHomeDir, online, lastSeen,
 * agents (names of installed ones), daemon (its state, or null), cipher,
 * error}. A machine
 * that does not decrypt keeps its id with error set. */
export async function openMachine(info, accountSecret, now = Date.now()) {
  const m = { id: String(info?.id ?? ""), host: "", platform: "", version: "", homeDir: "", happyHomeDir: "", online: false, lastSeen: Number(info?.activeAt) || 0, agents: [], daemon: null, cipher: null, error: "" };
  m.online = info?.active === true && now - m.lastSeen <= ONLINE_WITHIN;
  try {
    m.cipher = await c.sessionCipher(accountSecret, info?.dataEncryptionKey);
    const md = await c.openJSON(m.cipher, info?.metadata);
    if (md && typeof md === "object") {
      m.host = String(md.host ?? ""); m.platform = String(md.platform ?? ""); m.version = String(md.happyCliVersion ?? ""); m.homeDir = String(md.homeDir ?? ""); m.happyHomeDir = String(md.happyHomeDir ?? "");
      if (Array.isArray(md.agents)) m.agents = md.agents.filter((a) => a && a.installed === true && typeof a.name === "string").map((a) => a.name);
      else if (md.cliAvailability && typeof md.cliAvailability === "object") m.agents = Object.keys(md.cliAvailability).filter((k) => md.cliAvailability[k] === true);
    }
  } catch (e) {
    m.error = "metadata: " + e.message;
    return m;
  }
  if (info.daemonState) {
    try { m.daemon = await c.openJSON(m.cipher, info.daemonState); } catch (e) { m.error = "daemon state: " + e.message; }
  }
  // A daemon that stopped wrote "offline" on its way out (daemon.StatusOffline).
  if (m.daemon?.status === "offline") m.online = false;
  return m;
}

/** spawnParams builds the params of spawn-happy-session from the form
 * ({directory, agent, prompt, createFolder}), refusing what the daemon
 * would: a folder that is not absolute (or ~/…), no agent. */
export function spawnParams({ directory, agent, prompt = "", createFolder = false }) {
  const dir = String(directory ?? "").trim();
  if (!dir.startsWith("/") && !dir.startsWith("~")) throw new Error(`folder ${JSON.stringify(dir)}: give an absolute path (it is a folder on the machine)`);
  if (!agent) throw new Error("pick an agent");
  const p = { type: "spawn-in-directory", directory: dir, agent };
  if (createFolder) p.approvedNewDirectoryCreation = true;
  if (String(prompt).trim()) p.prompt = String(prompt);
  return p;
}

/** readSpawnReply reads the daemon's reply: {kind:"success", sessionId} |
 * {kind:"ask", directory} (the folder does not exist: create it?) |
 * {kind:"error", message}; anything else is an error naming the reply. */
export function readSpawnReply(r) {
  if (r?.type === "success" && typeof r.sessionId === "string" && r.sessionId) return { kind: "success", sessionId: r.sessionId };
  if (r?.type === "requestToApproveDirectoryCreation") return { kind: "ask", directory: String(r.directory ?? "") };
  if (r?.type === "error") return { kind: "error", message: String(r.errorMessage || "the daemon refused without saying why") };
  return { kind: "error", message: "unexpected reply from the daemon: " + JSON.stringify(r).slice(0, 200) };
}

/** spawnSession calls "<machineId>:spawn-happy-session" with params sealed
 * by the machine's cipher (daemon.SpawnOn's 40 s bound) and reads the reply
 * (readSpawnReply); a machine whose daemon is not connected is an RpcError
 * saying so (daemonNotRunning), at once. */
export async function spawnSession(sock, machine, params) {
  return readSpawnReply(await callMachine(sock, machine, "spawn-happy-session", params, 40000));
}

/** callMachine is callRPC on a machine's method; the relay's "RPC method
 * not available" (it answers at once when no socket of the machine is
 * connected) becomes an RpcError with daemonNotRunning's text, as
 * daemon.Call does. */
export async function callMachine(sock, machine, method, params, timeoutMs) {
  try {
    return await callRPC(sock, machine.cipher, machine.id, method, params, timeoutMs);
  } catch (e) {
    if (e instanceof RpcError && e.message === `${method}: RPC method not available`) throw new RpcError(daemonNotRunning(machine));
    throw e;
  }
}

/** daemonNotRunning says machine's daemon is not running, with its last
 * activity (daemon.NotRunningError's text; the time in the browser's
 * locale). */
export function daemonNotRunning(machine) {
  const seen = machine?.lastSeen > 0 ? "last seen " + new Date(machine.lastSeen).toLocaleString() : "never seen";
  return `the daemon of machine ${machine?.host || machine?.id} is not running (${seen})`;
}

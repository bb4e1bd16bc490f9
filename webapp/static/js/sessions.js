// What a person does to a whole session, as the CLI does it
// (docs/ARCHITECTURE.md, "The web app"): archive (app.Archive: the
// lifecycle metadata written by compare-and-set, then POST
// /v1/sessions/:id/archive), delete (app.Delete: DELETE /v1/sessions/:id),
// both refused for a running session, and resume through the daemon of the
// machine that ran it (happy spawn --resume). Also the folders a machine
// ran sessions in, for the New session form.

import * as c from "./crypto.js";
import { lifecycleState } from "./reduce.js";
import { ONLINE_WITHIN, readSpawnReply, callMachine } from "./devices.js";

/** SessionActionError is a refusal of an action on a session; reason is
 * "running" (the CLI's ErrRunning), "unreadable" (its metadata does not
 * decrypt), "relay" (the relay refused the metadata write or did not
 * answer) or "conflict" (other writers won every attempt). */
export class SessionActionError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "SessionActionError";
    this.reason = reason;
  }
}

/** RUNNING_MESSAGE is why a running session is not archived or deleted
 * (app.ErrRunning's words). */
export const RUNNING_MESSAGE = "the session is running: end its happy first (or wait until it is stale)";

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** MAX_CAS_ATTEMPTS is relay.MaxCASAttempts: how often a metadata write
 * adopts a newer version and tries again. */
export const MAX_CAS_ATTEMPTS = 8;

/**
 * updateSessionMetadata writes the session's metadata by compare-and-set
 * over the user-scoped socket, as relay.UpdateSessionMetadata does:
 * update-metadata {sid, metadata (sealed with the session's cipher),
 * expectedVersion}; on "version-mismatch" it adopts the relay's value and
 * version and applies fn again (at most MAX_CAS_ATTEMPTS times). fn gets
 * the current metadata object and returns the next. It returns {metadata,
 * version}. Errors: SessionActionError ("relay", "conflict").
 */
export async function updateSessionMetadata(sock, cipher, sid, current, version, fn, { ackTimeoutMs = 10000, pauseMs = 20 } = {}) {
  let cur = current, ver = version;
  for (let attempt = 1; attempt <= MAX_CAS_ATTEMPTS; attempt++) {
    const next = fn(cur);
    const sealed = await c.sealJSON(cipher, next);
    let ack;
    try {
      ack = await sock.timeout(ackTimeoutMs).emitWithAck("update-metadata", { sid, metadata: sealed, expectedVersion: ver });
    } catch {
      throw new SessionActionError("relay", `update-metadata: no acknowledgement from the relay within ${ackTimeoutMs / 1000} s`);
    }
    if (ack?.result === "success" && Number.isInteger(ack.version)) return { metadata: next, version: ack.version };
    if (ack?.result === "error") throw new SessionActionError("relay", `update-metadata: ${ack.message || "error"}`);
    if (ack?.result !== "version-mismatch" || !Number.isInteger(ack.version)) {
      throw new SessionActionError("relay", "update-metadata: the relay's acknowledgement is not one of success, version-mismatch or error");
    }
    try {
      cur = typeof ack.metadata === "string" ? await c.openJSON(cipher, ack.metadata) : null;
    } catch (e) {
      throw new SessionActionError("unreadable", `update-metadata: the relay's current metadata does not open: ${e.message}`);
    }
    ver = ack.version;
    await new Promise((res) => setTimeout(res, pauseMs * attempt));
  }
  throw new SessionActionError("conflict", `update-metadata: lost ${MAX_CAS_ATTEMPTS} times to concurrent writers`);
}

/** archiveFields merges the archive's fields into metadata, keeping every
 * other field (app.Archive's mergeFields: lifecycleState "archived",
 * lifecycleStateSince now in Unix ms, archivedBy "web", archiveReason
 * "user", lastActivityAt the session's last activity before the archive, so
 * the archive's own write does not make it look recent); metadata that is
 * not an object starts from {}. */
export function archiveFields(md, now, lastActivityAt) {
  const out = { ...(isObject(md) ? md : {}), lifecycleState: "archived", lifecycleStateSince: now, archivedBy: "web", archiveReason: "user" };
  if (lastActivityAt > 0) out.lastActivityAt = lastActivityAt;
  return out;
}

/** lastActivity is a session's last activity in Unix ms, as app.Opened's
 * LastActivity: the latest of the relay's updatedAt and activeAt, or, for an
 * archived session, the activity it had when it was archived. */
export function lastActivity(s) {
  if (s.md?.lifecycleState === "archived" && Number(s.md?.lastActivityAt) > 0) return Number(s.md.lastActivityAt);
  return Math.max(s.info?.updatedAt ?? 0, s.info?.activeAt ?? 0);
}

/**
 * archiveSession archives s ({info, md, cipher} as main.js keeps a
 * session) as app.Archive does: a running session is refused
 * (SessionActionError "running"), an archived one is left as it is
 * (returns false); else the metadata gets archiveFields by compare-and-set
 * over sock, then POST /v1/sessions/:id/archive. Returns true when it
 * archived. Errors: SessionActionError, RelayError.
 */
export async function archiveSession(relay, sock, s, now = Date.now()) {
  const st = lifecycleState(s.info, s.md, now);
  if (st === "running") throw new SessionActionError("running", RUNNING_MESSAGE);
  if (st === "archived") return false;
  if (!s.cipher || !s.md) throw new SessionActionError("unreadable", "its metadata cannot be read");
  const r = await updateSessionMetadata(sock, s.cipher, s.info.id, s.md, s.info.metadataVersion ?? 0, (cur) => archiveFields(cur, now, lastActivity(s)));
  s.md = r.metadata;
  s.info.metadataVersion = r.version;
  await relay.archive(s.info.id);
  return true;
}

/** deleteSession deletes s from the relay (DELETE /v1/sessions/:id) as
 * app.Delete does; a running session is refused (SessionActionError
 * "running"). Errors: SessionActionError, RelayError. */
export async function deleteSession(relay, s, now = Date.now()) {
  if (lifecycleState(s.info, s.md, now) === "running") throw new SessionActionError("running", RUNNING_MESSAGE);
  await relay.deleteSession(s.info.id);
}

/**
 * resumeTarget says whether s can be resumed through a daemon, and where:
 * {machine, params} — params of spawn-happy-session as `happy spawn
 * --resume ID` sends them, plus the web app's type: {type:
 * "spawn-in-directory", directory: "", agent: "claude", resumeSessionId}
 * — or {reason} saying why not. It takes an ended, archived or stale
 * Claude session that reported its own session id (claudeSessionId),
 * whose machine (metadata machineId) is among machines (openMachine's),
 * online at now with its keys open, and whose daemon runs the happy home
 * the session ran from (happyHomeDir, when both say).
 */
export function resumeTarget(s, machines, now = Date.now()) {
  const md = s.md;
  if (!md) return { reason: "its metadata cannot be read" };
  if (lifecycleState(s.info, md, now) === "running") return { reason: "it is running" };
  if (md.flavor !== "claude") return { reason: `only Claude sessions resume through a daemon; run happy resume ${s.info.id} on its computer` };
  if (typeof md.claudeSessionId !== "string" || md.claudeSessionId === "") return { reason: "the agent never reported its session id" };
  if (typeof md.machineId !== "string" || md.machineId === "") return { reason: "the session does not name its machine" };
  const m = machines.find((x) => x.id === md.machineId);
  if (!m) return { reason: `its machine ${md.host || md.machineId} has no daemon on this account (run happy daemon start there)` };
  const name = m.host || m.id;
  if (!m.cipher) return { reason: `the keys of ${name} do not open` };
  if (!m.online || now - m.lastSeen > ONLINE_WITHIN) return { reason: `${name} is offline` };
  if (md.happyHomeDir && m.happyHomeDir && md.happyHomeDir !== m.happyHomeDir) {
    return { reason: `it ran from the happy home ${md.happyHomeDir}; the daemon of ${name} runs ${m.happyHomeDir}` };
  }
  return { machine: m, params: { type: "spawn-in-directory", directory: "", agent: "claude", resumeSessionId: s.info.id } };
}

/** resumeSession calls the machine's spawn-happy-session with the resume
 * params of resumeTarget (40 s, as daemon.SpawnOn) and reads the reply
 * (readSpawnReply; a daemon not running is said at once, callMachine). */
export async function resumeSession(sock, target) {
  return readSpawnReply(await callMachine(sock, target.machine, "spawn-happy-session", target.params, 40000));
}

/** recentFolders lists the folders (metadata path) of the sessions that
 * machine ran, the most recently active first, then the folders of the
 * sessions its daemon state lists; each once, at most max. sessions are
 * main.js's ({info, md}). */
export function recentFolders(sessions, machine, max = 12) {
  const out = [];
  const add = (p) => { if (typeof p === "string" && p !== "" && !out.includes(p)) out.push(p); };
  const mine = [...sessions].filter((s) => s.md?.machineId === machine.id).sort((a, b) => lastActivity(b) - lastActivity(a));
  for (const s of mine) add(s.md.path);
  const ds = machine.daemon?.sessions;
  if (Array.isArray(ds)) for (const d of ds) add(d?.directory);
  return out.slice(0, max);
}

// The account's keys where the service worker can read them
// (docs/ARCHITECTURE.md, "The web app", "Notifications"). The page keeps its
// login in localStorage, which a service worker cannot read; to open a
// push's sealed detail and answer a tool from a notification, the worker
// needs the same three things: the relay URL, the token and the account
// secret. The page copies them into this origin's IndexedDB at sign-in and
// deletes them at sign-out, so they are exactly as exposed as the login
// itself (same origin, same browser profile), no more.

const DB = "happy";
const STORE = "keys";
const KEY = "account";

function openDB() {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error ?? new Error("IndexedDB: cannot open " + DB));
  });
}

async function run(mode, fn) {
  const db = await openDB();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = fn(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req?.result);
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB: transaction failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDB: transaction aborted"));
    });
  } finally {
    db.close();
  }
}

/** saveKeys stores {relay, token, secret (Uint8Array(32))} for the service worker. */
export async function saveKeys(account) {
  await run("readwrite", (s) => s.put({ relay: account.relay, token: account.token, secret: new Uint8Array(account.secret) }, KEY));
}

/** loadKeys returns what saveKeys stored, or null (signed out, or never signed in here). */
export async function loadKeys() {
  const v = await run("readonly", (s) => s.get(KEY));
  if (!v || typeof v.relay !== "string" || typeof v.token !== "string" || !(v.secret instanceof Uint8Array) || v.secret.length !== 32) return null;
  return { relay: v.relay, token: v.token, secret: v.secret };
}

/** clearKeys forgets them (sign-out). */
export async function clearKeys() {
  await run("readwrite", (s) => s.delete(KEY));
}

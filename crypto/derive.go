package crypto

import (
	"crypto/hmac"
	"crypto/sha512"
)

// Usages and paths of the reference clients' key tree.
const (
	contentUsage = "Happy EnCoder" // content key pair seed: DeriveKey(secret, contentUsage, "content")
	contentPath  = "content"
	blobUsage    = "Happy Blobs" // attachment keys
	blobSession  = "session"     // DeriveKey(sessionKey, blobUsage, blobSession)
	blobMaster   = "master"      // DeriveKey(accountSecret, blobUsage, blobMaster)
)

// DeriveKey walks the reference clients' HMAC-SHA512 key tree and returns the 32-byte
// key at path. The root is I = HMAC-SHA512(key = usage + " Master Seed", data = master);
// each path element e gives I = HMAC-SHA512(key = I[32:64], data = 0x00 || utf8(e)); the
// result is I[0:32]. master may have any length (the reference derives from 32-byte
// secrets and session keys). It never fails.
func DeriveKey(master []byte, usage string, path ...string) [32]byte {
	mac := hmac.New(sha512.New, []byte(usage+" Master Seed"))
	mac.Write(master)
	state := mac.Sum(make([]byte, 0, sha512.Size))
	for _, elem := range path {
		mac = hmac.New(sha512.New, state[32:])
		mac.Write([]byte{0x00})
		mac.Write([]byte(elem))
		state = mac.Sum(state[:0])
	}
	var out [32]byte
	copy(out[:], state[:32])
	return out
}

// ContentKeyPair returns the account's content box key pair, whose public half wraps
// every dataKey session key: seed = DeriveKey(accountSecret, "Happy EnCoder",
// "content"), then libsodium's crypto_box_seed_keypair (see BoxKeyPairFromSeed).
func ContentKeyPair(accountSecret [32]byte) (public, secret [32]byte) {
	return BoxKeyPairFromSeed(DeriveKey(accountSecret[:], contentUsage, contentPath))
}

// SessionBlobKey is the attachment key of a dataKey session: DeriveKey(sessionKey,
// "Happy Blobs", "session"). Attachments are sealed with NewBlobCipher.
func SessionBlobKey(sessionKey [32]byte) [32]byte {
	return DeriveKey(sessionKey[:], blobUsage, blobSession)
}

// AccountBlobKey is the attachment key of a legacy session: DeriveKey(accountSecret,
// "Happy Blobs", "master"). Attachments are sealed with NewBlobCipher.
func AccountBlobKey(accountSecret [32]byte) [32]byte {
	return DeriveKey(accountSecret[:], blobUsage, blobMaster)
}

//go:build unix

package main

// Where the system has no certificate store (the relay's image, FROM
// scratch), TLS to ACME CAs, push services and relays verifies against
// Mozilla's roots as Go's x/crypto ships them. A system store, or
// SSL_CERT_FILE/SSL_CERT_DIR naming a non-empty one, is used instead
// whenever it holds any root.
import _ "golang.org/x/crypto/x509roots/fallback"

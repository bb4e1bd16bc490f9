package crypto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestDecodeBase64Cases(t *testing.T) {
	cases := []struct {
		name string
		dec  func(string) ([]byte, error)
		in   string
		want []byte
		err  error
	}{
		{"std padded", DecodeBase64, "+/8=", []byte{0xfb, 0xff}, nil},
		{"std unpadded", DecodeBase64, "+/8", []byte{0xfb, 0xff}, nil},
		{"std empty", DecodeBase64, "", []byte{}, nil},
		{"std with newline", DecodeBase64, "AAEC\nAwQF", []byte{0, 1, 2, 3, 4, 5}, nil},
		{"std refuses url alphabet", DecodeBase64, "-_8=", nil, ErrBadEncoding},
		{"std refuses garbage", DecodeBase64, "!!!!", nil, ErrBadEncoding},
		{"std refuses wrong padding", DecodeBase64, "+/8==", nil, ErrBadEncoding},
		{"std refuses one char", DecodeBase64, "A", nil, ErrBadEncoding},
		{"std refuses inner padding", DecodeBase64, "+w==+w==", nil, ErrBadEncoding},
		{"url unpadded", DecodeBase64URL, "-_8", []byte{0xfb, 0xff}, nil},
		{"url padded", DecodeBase64URL, "-_8=", []byte{0xfb, 0xff}, nil},
		{"url two pads", DecodeBase64URL, "-w==", []byte{0xfb}, nil},
		{"url empty", DecodeBase64URL, "", []byte{}, nil},
		{"url refuses std alphabet", DecodeBase64URL, "+/8", nil, ErrBadEncoding},
		{"url refuses short padding", DecodeBase64URL, "-w=", nil, ErrBadEncoding},
		{"url refuses space", DecodeBase64URL, "-_ 8", nil, ErrBadEncoding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.dec(tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != nil {
					t.Fatalf("got %x, %v; want error %v", got, err, tc.err)
				}
				if strings.Contains(err.Error(), tc.in) && tc.in != "" {
					t.Errorf("error %q quotes its input", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !bytes.Equal(got, tc.want) {
				t.Errorf("got %x (nil=%v), want %x", got, got == nil, tc.want)
			}
		})
	}
}

func TestBase64RoundTrip(t *testing.T) {
	for n := 0; n < 70; n++ {
		raw := bytes.Repeat([]byte{byte(n), 0xfb, 0xff}, n)[:n]
		for _, p := range []struct {
			enc func([]byte) string
			dec func(string) ([]byte, error)
		}{{EncodeBase64, DecodeBase64}, {EncodeBase64URL, DecodeBase64URL}} {
			s := p.enc(raw)
			got, err := p.dec(s)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("n=%d %q: %x, %v", n, s, got, err)
			}
		}
		if strings.ContainsAny(EncodeBase64URL(raw), "+/=") {
			t.Fatalf("base64url output %q has +, / or =", EncodeBase64URL(raw))
		}
	}
}

func TestBackupKeyFormat(t *testing.T) {
	var zero, ones, seq [32]byte
	for i := range ones {
		ones[i] = 0xff
		seq[i] = byte(i)
	}
	// Expected strings computed independently (Python's base64.b32encode, '=' stripped).
	cases := map[[32]byte]string{
		zero: "AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AAAAA-AA",
		ones: "77777-77777-77777-77777-77777-77777-77777-77777-77777-77777-7Q",
		seq:  "AAAQE-AYEAU-DAOCA-JBIFQ-YDIOB-4IBCE-QTCQK-RMFYY-DENBW-HA5DY-PQ",
	}
	for secret, want := range cases {
		got := FormatBackupKey(secret)
		if got != want {
			t.Errorf("FormatBackupKey(%x) = %q, want %q", secret[:4], got, want)
		}
		if len(got) != 62 || strings.Count(got, "-") != 10 {
			t.Errorf("%q: want 52 characters in 11 groups", got)
		}
		back, err := ParseBackupKey(got)
		if err != nil || back != secret {
			t.Errorf("parse %q: %x, %v", got, back, err)
		}
	}
}

func TestParseBackupKeyTolerance(t *testing.T) {
	var secret [32]byte
	for i := range secret {
		secret[i] = byte(i*7 + 13)
	}
	formatted := FormatBackupKey(secret)
	bare := strings.ReplaceAll(formatted, "-", "")
	confused := strings.NewReplacer("O", "0", "I", "1", "B", "8", "G", "9").Replace(formatted)
	if confused == formatted {
		t.Fatal("test key has none of O, I, B, G; pick another")
	}
	inputs := map[string]string{
		"canonical":          formatted,
		"lower case":         strings.ToLower(formatted),
		"no dashes":          bare,
		"spaces":             strings.ReplaceAll(formatted, "-", " "),
		"spaces around dash": strings.ReplaceAll(formatted, "-", " - "),
		"newlines":           strings.ReplaceAll(formatted, "-", "\n"),
		"surrounding space":  " \t\n" + formatted + "\r\n ",
		"quoted":             `"` + formatted + `"`,
		"backticks":          "```" + formatted + "```",
		"dots":               strings.ReplaceAll(formatted, "-", "."),
		"underscores":        strings.ReplaceAll(formatted, "-", "_"),
		"slashes":            strings.ReplaceAll(formatted, "-", "/"),
		"double dashes":      strings.ReplaceAll(formatted, "-", "--"),
		"look-alike digits":  confused,
		"padded":             bare + "====",
		"unicode dash":       strings.ReplaceAll(formatted, "-", "\u2013"),
		"odd grouping":       bare[:3] + "-" + bare[3:20] + " " + bare[20:],
	}
	for name, in := range inputs {
		got, err := ParseBackupKey(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != secret {
			t.Errorf("%s: parsed a different key", name)
		}
	}
}

func TestParseBackupKeyErrors(t *testing.T) {
	formatted := FormatBackupKey(testKey("k"))
	bare := strings.ReplaceAll(formatted, "-", "")
	cases := map[string]struct {
		in   string
		want error
	}{
		"empty":           {"", ErrBadLength},
		"only dashes":     {"-----", ErrBadLength},
		"one group short": {bare[:47], ErrBadLength},
		"one char short":  {bare[:51], ErrBadLength},
		"one char extra":  {bare + "A", ErrBadLength},
		"two keys":        {bare + bare, ErrBadLength},
		"base64 of key":   {EncodeBase64(bytes.Repeat([]byte{0xfb}, 32)), ErrBadEncoding},
		"bang":            {formatted[:10] + "!" + formatted[10:], ErrBadEncoding},
		"plus":            {formatted + "+", ErrBadEncoding},
		"non-ascii":       {formatted[:5] + "é" + formatted[5:], ErrBadEncoding},
		"invalid utf-8":   {formatted + "\xff", ErrBadEncoding},
	}
	for name, tc := range cases {
		got, err := ParseBackupKey(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", name, err, tc.want)
			continue
		}
		if got != ([32]byte{}) {
			t.Errorf("%s: non-zero key alongside an error", name)
		}
		if strings.Contains(err.Error(), bare[:10]) {
			t.Errorf("%s: error %q quotes the key", name, err)
		}
	}
}

// TestDecodeBase64LineBreaks: line breaks are ignored wherever they appear, including
// after the '=' padding (a file or a terminal paste usually ends with one).
func TestDecodeBase64LineBreaks(t *testing.T) {
	cases := []struct {
		name string
		dec  func(string) ([]byte, error)
		in   string
		want []byte
		err  string
	}{
		{"std padded then LF", DecodeBase64, "QQ==\n", []byte("A"), ""},
		{"std padded then CRLF", DecodeBase64, "QQ==\r\n", []byte("A"), ""},
		{"std one pad then LF", DecodeBase64, "QUI=\n", []byte("AB"), ""},
		{"std LF between pads", DecodeBase64, "QQ=\n=", []byte("A"), ""},
		{"std LF first", DecodeBase64, "\nQQ==", []byte("A"), ""},
		{"std unpadded then LF", DecodeBase64, "QQ\n", []byte("A"), ""},
		{"std only line breaks", DecodeBase64, "\r\n", []byte{}, ""},
		{"url padded then LF", DecodeBase64URL, "-w==\n", []byte{0xfb}, ""},
		{"url padded then CRLF", DecodeBase64URL, "-_8=\r\n", []byte{0xfb, 0xff}, ""},
		{"std space after padding", DecodeBase64, "QQ== ", nil,
			"crypto: decode base64 of 5 characters: illegal base64 data at input byte 4: bad encoding"},
		{"std missing pad then LF", DecodeBase64, "QQ=\n", nil,
			"crypto: decode base64 of 4 characters: illegal base64 data at input byte 4: bad encoding"},
		{"url std alphabet then LF", DecodeBase64URL, "+w==\n", nil,
			"crypto: decode base64url of 5 characters: illegal base64 data at input byte 0: bad encoding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.dec(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, ErrBadEncoding) || got != nil {
					t.Fatalf("got %x, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if got == nil || !bytes.Equal(got, tc.want) {
				t.Errorf("got %x, want %x", got, tc.want)
			}
		})
	}
}

// TestBackupKeyTrailingBitsAlias pins the documented aliasing: the last character
// carries 4 unused bits, so 16 spellings of it give one secret.
func TestBackupKeyTrailingBitsAlias(t *testing.T) {
	secret := testKey("alias")
	canonical := FormatBackupKey(secret)
	last := canonical[len(canonical)-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	idx := strings.IndexByte(alphabet, last)
	aliases := 0
	for i := 0; i < len(alphabet); i++ {
		alt := canonical[:len(canonical)-1] + alphabet[i:i+1]
		got, err := ParseBackupKey(alt)
		same := i&^0x0f == idx&^0x0f
		switch {
		case same && (err != nil || got != secret):
			t.Errorf("%q: %v, want the same secret", alt, err)
		case !same && err == nil && got == secret:
			t.Errorf("%q parsed to the same secret", alt)
		}
		if err == nil && got == secret {
			aliases++
		}
	}
	if aliases != 16 {
		t.Errorf("%d spellings give the secret, want 16", aliases)
	}
}

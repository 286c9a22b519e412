package artifacts

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"
)

// HandlePrefix starts every artifact handle.
const HandlePrefix = "art_"

// handleRandBytes is the entropy of a handle: 128 bits.
const handleRandBytes = 16

// HandleLen is the exact length of a valid handle: the prefix plus 26 base32
// characters.
const HandleLen = len(HandlePrefix) + 26

// handleEncoding is lowercase RFC 4648 base32 without padding. ValidateHandle
// also insists on the canonical spelling (zero trailing bits), so every handle
// has exactly one.
var handleEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newHandle returns a fresh handle with 128 bits from crypto/rand.
func newHandle() string {
	var b [handleRandBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead).
	return HandlePrefix + handleEncoding.EncodeToString(b[:])
}

// ValidateHandle reports whether h is a well-formed artifact handle. It says
// nothing about whether the handle exists. The error wraps [ErrInvalid].
func ValidateHandle(h string) error {
	if len(h) != HandleLen || !strings.HasPrefix(h, HandlePrefix) {
		return fmt.Errorf("%w: malformed handle", ErrInvalid)
	}
	body := h[len(HandlePrefix):]
	var b [handleRandBytes + 1]byte // DecodedLen(26) is 16; +1 guards any miscount.
	n, err := handleEncoding.Decode(b[:], []byte(body))
	if err != nil || n != handleRandBytes || handleEncoding.EncodeToString(b[:n]) != body {
		return fmt.Errorf("%w: malformed handle", ErrInvalid)
	}
	return nil
}

// validateOwner checks an owner key.
func validateOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalid)
	case len(owner) > MaxOwnerBytes:
		return fmt.Errorf("%w: owner longer than %d bytes", ErrInvalid, MaxOwnerBytes)
	}
	return nil
}

// validateRef checks the owner and handle of a lookup.
func validateRef(owner, handle string) error {
	if err := validateOwner(owner); err != nil {
		return err
	}
	return ValidateHandle(handle)
}

package artifacts

import (
	"fmt"
	"strings"
)

// Checks shared by every Store implementation, so that a backend other
// than BadgerStore refuses exactly the same input with the same errors.

// NewHandle returns a fresh handle: HandlePrefix and 128 bits from
// crypto/rand, in the one spelling ValidateHandle accepts.
func NewHandle() string { return newHandle() }

// ValidateOwner returns an ErrInvalid error for an owner key no store
// accepts (empty, or longer than MaxOwnerBytes).
func ValidateOwner(owner string) error { return validateOwner(owner) }

// ValidatePutInput returns an ErrInvalid error for a PutInput no store
// accepts: both Data and Body, a negative Size, an oversized or
// control-character media type, an oversized label.
func ValidatePutInput(in PutInput) error {
	switch {
	case in.Body != nil && in.Data != nil:
		return fmt.Errorf("%w: set Data or Body, not both", ErrInvalid)
	case in.Body != nil && in.Size < 0:
		return fmt.Errorf("%w: negative Size", ErrInvalid)
	case len(in.MediaType) > MaxMediaTypeBytes:
		return fmt.Errorf("%w: media type longer than %d bytes", ErrInvalid, MaxMediaTypeBytes)
	case len(in.Label) > MaxLabelBytes:
		return fmt.Errorf("%w: label longer than %d bytes", ErrInvalid, MaxLabelBytes)
	case strings.ContainsFunc(in.MediaType, isControl):
		return fmt.Errorf("%w: control character in media type", ErrInvalid)
	}
	return nil
}

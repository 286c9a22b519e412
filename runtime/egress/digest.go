package egress

import (
	"crypto/sha256"
	"encoding/hex"
)

// HostReasonPrefix prefixes, among a receipt's reason codes, the digest of
// a destination an egress check refused: receipts can be correlated by it
// and searched for a known host, and they never carry a host in clear.
const HostReasonPrefix = "EGRESS_HOST_SHA256:"

// HostReason is the reason code naming destination d (a host, or
// host:port) by the first 8 bytes of its sha256, in hex.
func HostReason(d string) string {
	sum := sha256.Sum256([]byte(d))
	return HostReasonPrefix + hex.EncodeToString(sum[:8])
}

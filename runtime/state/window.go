package state

import (
	"encoding/binary"
	"time"
)

// A sliding window is kept as a log of the admitted calls' times, oldest
// first: 8 bytes (Unix nanoseconds, big endian) per call. The memory and
// Badger backends store it as an ordinary value; the Redis backend keeps
// a sorted set instead.

// DecodeWindow returns the times of a window log, dropping a torn tail.
func DecodeWindow(b []byte) []int64 {
	out := make([]int64, 0, len(b)/8)
	for len(b) >= 8 {
		out = append(out, int64(binary.BigEndian.Uint64(b)))
		b = b[8:]
	}
	return out
}

// EncodeWindow is the inverse of DecodeWindow.
func EncodeWindow(times []int64) []byte {
	b := make([]byte, 0, 8*len(times))
	for _, t := range times {
		b = binary.BigEndian.AppendUint64(b, uint64(t))
	}
	return b
}

// AdmitLogs runs an AdmitRequest over the windows' logs (logs[i] belongs
// to req.Keys[i]) and returns the result and, when the call was counted,
// the new logs to store (nil when nothing changes). It is the shared core
// of the backends that store logs as values; the caller makes it atomic.
func AdmitLogs(req AdmitRequest, logs [][]int64) (AdmitResult, [][]int64) {
	now := req.Now.UnixNano()
	cut := now - int64(req.Window)
	for i := range logs {
		l := logs[i]
		n := 0
		for n < len(l) && l[n] <= cut {
			n++
		}
		logs[i] = l[n:]
	}
	for i, l := range logs {
		if lim := req.Limits[i]; len(l) >= lim {
			// The call fits again when the oldest call that keeps the
			// window full leaves it.
			wait := time.Duration(l[len(l)-lim] - cut)
			return AdmitResult{Denied: i, RetryAfter: max(wait, time.Millisecond)}, nil
		}
	}
	if !req.Take {
		return AdmitResult{Denied: -1}, nil
	}
	for i := range logs {
		logs[i] = append(logs[i], now)
	}
	return AdmitResult{Denied: -1}, logs
}

// Package controls holds the opt-in dispatch-path controls of spec 003
// §4.4-§4.5: retry with bounded exponential backoff, the read-only result
// cache, rate limits, and tolerant argument repair. Each is off in its zero
// configuration, and then changes nothing.
package controls

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
)

// RetryPolicy retries transient failures with bounded exponential backoff
// (spec 003 §4.5). MaxAttempts <= 1 disables it.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt.
	MaxAttempts int
	// BaseDelay is the delay before the second attempt; it doubles per
	// attempt, capped at MaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Jitter draws each delay uniformly from (0, delay] (full jitter).
	Jitter bool
	// RetryableCodes are the error codes retried.
	RetryableCodes []string
}

// Enabled reports whether the policy ever retries.
func (p RetryPolicy) Enabled() bool { return p.MaxAttempts > 1 }

// Delay returns the backoff before attempt n (n >= 2): BaseDelay * 2^(n-2)
// capped at MaxDelay, at least hint (a server's Retry-After, also capped),
// and with jitter drawn from (0, delay].
func (p RetryPolicy) Delay(n int, hint time.Duration) time.Duration {
	d := p.BaseDelay
	for i := 2; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter && d > 0 {
		d = time.Duration(rand.Int64N(int64(d))) + 1
	}
	if hint > d {
		d = hint
		if p.MaxDelay > 0 && d > p.MaxDelay {
			d = p.MaxDelay
		}
	}
	return d
}

// Failure describes a failed attempt to Do: its error code, whether the
// caller allows retrying it at all, and the server's retry hint.
type Failure struct {
	Code string
	// Safe is false when a retry could repeat a side effect.
	Safe       bool
	RetryAfter time.Duration
}

// Do runs fn until it succeeds, fails with a code the policy does not
// retry (or that classify marks unsafe), or MaxAttempts are spent, sleeping
// the backoff between attempts. It returns fn's last result, the number of
// attempts made and fn's last error. A done ctx stops the retries.
func Do[T any](ctx context.Context, p RetryPolicy, fn func(ctx context.Context) (T, error), classify func(error) Failure) (T, int, error) {
	attempts := 0
	for {
		attempts++
		v, err := fn(ctx)
		if err == nil || attempts >= max(p.MaxAttempts, 1) {
			return v, attempts, err
		}
		f := classify(err)
		if !f.Safe || !slices.Contains(p.RetryableCodes, f.Code) {
			return v, attempts, err
		}
		t := time.NewTimer(p.Delay(attempts+1, f.RetryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, attempts, err
		case <-t.C:
		}
	}
}

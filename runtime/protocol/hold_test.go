package protocol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingCall is a call that asks for input once and returns the answer's
// action, or the error of its Ask.
func askingCall(ctx context.Context) (any, error) {
	h := HeldOf(ctx)
	if h == nil {
		return nil, errors.New("no held call in the context")
	}
	resp, err := h.Ask(ctx, &mcp.ElicitParams{Message: "q"})
	if err != nil {
		return nil, err
	}
	return resp.(*mcp.ElicitResult).Action, nil
}

func TestHoldRoundTrip(t *testing.T) {
	t.Parallel()
	hs, err := NewHolds(HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx := context.Background()
	h, err := hs.Start(ctx, askingCall)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := h.Next(ctx)
	if err != nil || ev.Done || ev.ID != "q1" || ev.Request.(*mcp.ElicitParams).Message != "q" {
		t.Fatalf("first event %+v %v", ev, err)
	}
	if err := hs.Hold(h); err != nil {
		t.Fatal(err)
	}
	if hs.Len() != 1 {
		t.Fatalf("held %d", hs.Len())
	}
	got, err := hs.Take(h.ID())
	if err != nil || got != h {
		t.Fatalf("take: %v", err)
	}
	if _, err := hs.Take(h.ID()); !errors.Is(err, ErrHoldGone) {
		t.Fatalf("second take: %v", err)
	}
	if id, _, ok := h.Pending(); !ok || id != "q1" {
		t.Fatalf("pending %q %v", id, ok)
	}
	if h.Answer("q2", &mcp.ElicitResult{}, nil) {
		t.Fatal("an answer to another id was taken")
	}
	if !h.Answer("q1", &mcp.ElicitResult{Action: "accept"}, nil) {
		t.Fatal("the answer was not taken")
	}
	ev, err = h.Next(ctx)
	if err != nil || !ev.Done || ev.Result != "accept" || ev.Err != nil {
		t.Fatalf("end %+v %v", ev, err)
	}
}

// TestHoldExpiry: a held call not taken within the timeout is cancelled
// and can no longer be taken.
func TestHoldExpiry(t *testing.T) {
	t.Parallel()
	hs, err := NewHolds(HoldOptions{Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ended := make(chan error, 1)
	h, err := hs.Start(context.Background(), func(ctx context.Context) (any, error) {
		_, err := askingCall(ctx)
		ended <- err
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := hs.Hold(h); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, ErrHoldGone) {
		t.Fatalf("the parked request ended with %v", err)
	}
	if _, err := hs.Take(h.ID()); !errors.Is(err, ErrHoldGone) {
		t.Fatalf("take after expiry: %v", err)
	}
}

// TestHoldCancel: the waiting request's end cancels a running call.
func TestHoldCancel(t *testing.T) {
	t.Parallel()
	hs, err := NewHolds(HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ended := make(chan error, 1)
	h, err := hs.Start(context.Background(), func(ctx context.Context) (any, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("next: %v", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("call ended with %v", err)
	}
}

// TestHoldFull: past Max, Hold refuses (the caller sheds the call); Close
// cancels what is held and running, and refuses new calls.
func TestHoldFull(t *testing.T) {
	t.Parallel()
	hs, err := NewHolds(HoldOptions{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var held []*Held
	for range 2 {
		h, err := hs.Start(ctx, askingCall)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Next(ctx); err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	if err := hs.Hold(held[0]); err != nil {
		t.Fatal(err)
	}
	if err := hs.Hold(held[1]); !errors.Is(err, ErrHoldFull) {
		t.Fatalf("second hold: %v", err)
	}
	hs.Close()
	for _, h := range held {
		select {
		case <-h.done:
		default:
			t.Fatal("a call outlived Close")
		}
	}
	if _, err := hs.Start(ctx, askingCall); !errors.Is(err, ErrHoldClosed) {
		t.Fatalf("start after close: %v", err)
	}
}

func TestAsksMidCall(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": true, "2024-11-05": true, "2025-11-25": true, "2026-07-28": false} {
		if got := AsksMidCall(v); got != want {
			t.Errorf("AsksMidCall(%q) = %v", v, got)
		}
	}
}

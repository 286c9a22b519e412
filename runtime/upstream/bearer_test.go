package upstream

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

type captureRT struct{ got *http.Request }

func (c *captureRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.got = req
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

func TestHeaderTransportPerCallBearer(t *testing.T) {
	base := &captureRT{}
	gatewayErr := errors.New("no gateway token")
	var gateway func(context.Context) (string, error)
	tr := &headerTransport{base: base, origin: "http://up.example", name: "remote",
		headers: http.Header{"X-Org": {"acme"}},
		bearer:  func(ctx context.Context) (string, error) { return gateway(ctx) }}
	send := func(ctx context.Context, url string) (string, error) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		req.Header.Set("Authorization", "Bearer client-token")
		base.got = nil
		if _, err := tr.RoundTrip(req); err != nil {
			return "", err
		}
		if req.Header.Get("Authorization") != "Bearer client-token" {
			t.Fatal("the RoundTripper modified its request")
		}
		return base.got.Header.Get("Authorization"), nil
	}
	gateway = func(context.Context) (string, error) { return "gw-exchanged", nil }

	ctx := WithBearer(context.Background(), "remote", "caller-exchanged")
	if got, _ := send(ctx, "http://up.example/mcp"); got != "Bearer caller-exchanged" {
		t.Fatalf("per-call: %q", got)
	}
	if base.got.Header.Get("X-Org") != "acme" {
		t.Fatal("configured headers lost")
	}
	if got, _ := send(context.Background(), "http://up.example/mcp"); got != "Bearer gw-exchanged" {
		t.Fatalf("no caller: %q", got)
	}
	// Another upstream's token, or another origin, gets nothing of ours.
	if got, _ := send(WithBearer(context.Background(), "other", "x"), "http://up.example/mcp"); got != "Bearer gw-exchanged" {
		t.Fatalf("other upstream's token: %q", got)
	}
	if got, _ := send(ctx, "http://elsewhere.example/mcp"); got != "Bearer client-token" || base.got.Header.Get("X-Org") != "" {
		t.Fatalf("other origin: %q", got)
	}
	gateway = func(context.Context) (string, error) { return "", gatewayErr }
	if _, err := send(context.Background(), "http://up.example/mcp"); !errors.Is(err, gatewayErr) {
		t.Fatalf("gateway token error: %v", err)
	}
	if got, err := send(ctx, "http://up.example/mcp"); err != nil || got != "Bearer caller-exchanged" {
		t.Fatalf("per-call with a failing gateway source: %q %v", got, err)
	}
}

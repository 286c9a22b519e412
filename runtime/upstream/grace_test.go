package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// graceServer answers a POST with one event, then ends the stream when end
// receives (with a nil end, only when the client goes away).
func graceServer(t *testing.T, end <-chan struct{}) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-end:
		case <-r.Context().Done():
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestDrainGraceReusesConnection: the call's context ends right after its
// answer is read, as quiver's does when it answers its own client, and the
// upstream ends the stream a moment later; the drain still reads to the end,
// so the connection goes back to the pool instead of being closed.
func TestDrainGraceReusesConnection(t *testing.T) {
	end := make(chan struct{})
	srv, conns := graceServer(t, end)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	ht := &headerTransport{base: tr, origin: srv.URL}
	const calls = 10
	for i := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
		resp, err := ht.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if strings.HasPrefix(line, "data:") {
				break
			}
		}
		cancel() // the call is answered
		end <- struct{}{}
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("call %d: the drain after the call ended: %v", i, err)
		}
		_ = resp.Body.Close()
	}
	if n := conns.Load(); n > 2 {
		t.Fatalf("%d connections for %d calls: the drain was cut off", n, calls)
	}
}

// TestDrainGraceStillAborts: an upstream that never ends the stream does
// not hold the body past the call's end (plus the grace).
func TestDrainGraceStillAborts(t *testing.T) {
	srv, _ := graceServer(t, nil)
	ht := &headerTransport{base: srv.Client().Transport, origin: srv.URL}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := ht.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the body ended cleanly though the upstream never ended it")
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing check
		t.Fatal("the body was still open 30 s after the call ended")
	}
}

// TestDrainGraceDeadline: a deadline on the call is kept.
func TestDrainGraceDeadline(t *testing.T) {
	srv, _ := graceServer(t, nil)
	ht := &headerTransport{base: srv.Client().Transport, origin: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := ht.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Fatal("the body outlived the call's deadline")
	}
}

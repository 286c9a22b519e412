package upstream

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// drainGrace is how long a POST's response may still be read after the
// call that sent it ended. The go-sdk's streamable client returns a call as
// soon as its answer arrives and drains the rest of the event stream in the
// background, but quiver ends the call's context when it answers its own
// client; an upstream that ends its stream a moment after the answer (a
// stateless go-sdk server tears a session down first) then has the drain
// aborted, and net/http closes the connection instead of reusing it: a new
// TCP connection for a fifth of the calls to such an upstream.
const drainGrace = 100 * time.Millisecond

// withDrainGrace sends req on base with a context that outlives req's by
// drainGrace: req's cancellation or deadline still aborts the request and
// its body, drainGrace later, and the body's Close (after the go-sdk's
// drain) releases it at once.
func withDrainGrace(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var timer atomic.Pointer[time.Timer]
	stop := context.AfterFunc(parent, func() {
		timer.Store(time.AfterFunc(drainGrace, cancel))
	})
	release := func() {
		stop()
		if t := timer.Load(); t != nil {
			t.Stop()
		}
		cancel()
	}
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releaseOnClose{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// releaseOnClose calls release when the body is closed.
type releaseOnClose struct {
	io.ReadCloser
	release func()
}

// Close implements io.Closer.
func (b *releaseOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

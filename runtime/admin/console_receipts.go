package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// maxStreams bounds the live tails open at once (each polls the receipts
// files); past it a tail is refused with 503 and the page still works.
const maxStreams = 16

// heartbeat keeps an idle live tail's connection open through proxies.
const heartbeat = 15 * time.Second

// receiptFilter reads the receipts page's filters. since is a duration
// back from now (e.g. 15m, 24h).
func (c *console) receiptFilter(q url.Values) (receipts.Filter, error) {
	f := receipts.Filter{Sub: strings.TrimSpace(q.Get("sub")), ToolID: strings.TrimSpace(q.Get("tool")),
		Result: q.Get("result"), Code: strings.TrimSpace(q.Get("code")), Method: strings.TrimSpace(q.Get("method"))}
	for _, v := range []string{f.Sub, f.ToolID, f.Code, f.Method} {
		if len(v) > 512 {
			return f, badRequest("a filter is longer than 512 bytes")
		}
	}
	switch f.Result {
	case "", "allow", "deny", "require_approval":
	default:
		return f, badRequest("result is allow, deny or require_approval")
	}
	if f.ToolID != "" {
		if _, err := policy.CompileGlob(f.ToolID); err != nil {
			return f, badRequest("tool: %v", err)
		}
	}
	if s := strings.TrimSpace(q.Get("since")); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return f, badRequest("since is a duration such as 15m or 24h")
		}
		f.From = c.o.Now().Add(-d)
	}
	return f, nil
}

func (c *console) receipts(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	data := map[string]any{"Sub": q.Get("sub"), "Tool": q.Get("tool"), "Result": q.Get("result"), "Code": q.Get("code"),
		"Method": q.Get("method"), "Since": q.Get("since"), "Stream": "/ui/receipts/stream?" + r.URL.RawQuery}
	if c.o.Receipts.Dir == "" {
		data["Off"] = true
		c.render(w, r, http.StatusOK, "receipts", s, data)
		return
	}
	f, err := c.receiptFilter(q)
	if err != nil {
		c.pageError(w, r, s, "receipts", data, err)
		return
	}
	var before receipts.Position
	if b := q.Get("before"); b != "" {
		if before, err = receipts.ParsePosition(b); err != nil {
			c.pageError(w, r, s, "receipts", data, badRequest("before is not a receipt position"))
			return
		}
	}
	page, next, err := c.o.Receipts.Newest(r.Context(), f, before, receiptsPageSize)
	if err != nil && !errors.Is(err, context.Canceled) {
		c.pageError(w, r, s, "receipts", data, badRequest("the receipts cannot be read: %v", err))
		return
	}
	data["Entries"] = page
	if !next.Day.IsZero() {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("before", next.String())
		data["Older"] = "/ui/receipts?" + nq.Encode()
	}
	c.render(w, r, http.StatusOK, "receipts", s, data)
}

// receipt shows one receipt: at a position (links from the list), or by
// id within a day (links from the live tail).
func (c *console) receipt(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	if c.o.Receipts.Dir == "" {
		c.fail(w, r, s, http.StatusNotFound, "receipts are not written")
		return
	}
	var rc receipts.Receipt
	var err error
	switch {
	case q.Get("at") != "":
		var p receipts.Position
		if p, err = receipts.ParsePosition(q.Get("at")); err == nil {
			rc, err = c.o.Receipts.At(p)
		}
	case q.Get("id") != "" && len(q.Get("id")) <= 64:
		rc, err = c.findReceipt(r.Context(), q.Get("id"), q.Get("day"))
	default:
		err = receipts.ErrBadPosition
	}
	if err != nil {
		c.fail(w, r, s, http.StatusNotFound, "no such receipt")
		return
	}
	pretty, _ := json.MarshalIndent(rc, "", "  ")
	c.render(w, r, http.StatusOK, "receipt", s, map[string]any{"R": rc, "JSON": string(pretty)})
}

// findReceipt looks for receipt id in one day's file, newest first (the
// live tail links receipts written moments ago).
func (c *console) findReceipt(ctx context.Context, id, day string) (receipts.Receipt, error) {
	d, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return receipts.Receipt{}, receipts.ErrBadPosition
	}
	var found *receipts.Receipt
	at := receipts.Position{}
	f := receipts.Filter{From: d, To: d.Add(24 * time.Hour)}
	for range 100 { // at most 100 pages of 500 receipts
		page, next, err := c.o.Receipts.Newest(ctx, f, at, 500)
		if err != nil {
			return receipts.Receipt{}, err
		}
		for i := range page {
			if page[i].ReceiptID == id {
				found = &page[i].Receipt
				break
			}
		}
		if found != nil || next.Day.IsZero() {
			break
		}
		at = next
	}
	if found == nil {
		return receipts.Receipt{}, receipts.ErrBadPosition
	}
	return *found, nil
}

// tailRow is one receipt as the live tail sends it: what the list shows,
// never more (no argument values exist in receipts, and the message is
// left to the detail page).
type tailRow struct {
	TS       string  `json:"ts"`
	Day      string  `json:"day"`
	ID       string  `json:"id"`
	Sub      string  `json:"sub"`
	Method   string  `json:"method"`
	Tool     string  `json:"tool"`
	Result   string  `json:"result"`
	Code     string  `json:"code"`
	Duration float64 `json:"ms"`
}

func rowOf(rc receipts.Receipt) tailRow {
	return tailRow{TS: rc.TS.UTC().Format(time.RFC3339), Day: rc.TS.UTC().Format(time.DateOnly), ID: rc.ReceiptID,
		Sub: rc.Principal.Sub, Method: rc.MCP.Method, Tool: rc.MCP.ToolID, Result: rc.Decision.Result,
		Code: rc.Outcome.ErrorCode, Duration: rc.Outcome.DurationMS}
}

// stream is the live tail: server-sent events, one "receipt" event per
// matching receipt written after it starts.
func (c *console) stream(w http.ResponseWriter, r *http.Request, _ *session) {
	if c.o.Receipts.Dir == "" {
		http.Error(w, "receipts are not written", http.StatusNotFound)
		return
	}
	f, err := c.receiptFilter(r.URL.Query())
	if err != nil {
		var ae *apiError
		errors.As(err, &ae)
		http.Error(w, ae.msg, http.StatusBadRequest)
		return
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many live tails are open", http.StatusServiceUnavailable)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": tail\n\n")
	fl.Flush()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The heartbeat shares the writer with Follow's callback.
	events := make(chan []byte, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.o.Receipts.Follow(ctx, f, c.o.Poll, func(rc receipts.Receipt) error {
			data, err := json.Marshal(rowOf(rc))
			if err != nil {
				return nil
			}
			select {
			case events <- data:
				return nil
			case <-ctx.Done():
				return receipts.ErrStop
			}
		})
	}()
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case data := <-events:
			if _, err := fmt.Fprintf(w, "event: receipt\ndata: %s\n\n", data); err != nil {
				cancel()
				<-done
				return
			}
			fl.Flush()
		case <-t.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				cancel()
				<-done
				return
			}
			fl.Flush()
		case <-done:
			return
		}
	}
}

package benchmarks

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Deterministic large tool outputs, generated the way testdata/upstream's
// big_log, big_json and big_csv tools generate theirs (same shapes, same
// seeds), so that the firewall figures do not depend on a running server.

// genBase anchors generated timestamps so outputs are reproducible.
func genBase() time.Time { return time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC) }

// GenLog returns n deterministic application log lines (INFO, WARN and
// about 3% ERROR lines with request ids and latencies).
func GenLog(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	services := []string{"api", "billing", "auth", "worker", "scheduler"}
	var b strings.Builder
	t := genBase()
	for i := range n {
		t = t.Add(time.Duration(r.IntN(900)+1) * time.Millisecond)
		svc := services[r.IntN(len(services))]
		reqID := fmt.Sprintf("%08x", r.Uint32())
		switch p := r.IntN(100); {
		case p < 3:
			fmt.Fprintf(&b, "%s ERROR [%s] request_id=%s msg=%q err=%q attempt=%d\n",
				t.Format(time.RFC3339Nano), svc, reqID, "upstream call failed", "dial tcp 10.0.3.17:5432: connect: connection refused", r.IntN(3)+1)
		case p < 12:
			fmt.Fprintf(&b, "%s WARN  [%s] request_id=%s msg=%q latency_ms=%d threshold_ms=500\n",
				t.Format(time.RFC3339Nano), svc, reqID, "slow request", 500+r.IntN(2500))
		default:
			fmt.Fprintf(&b, "%s INFO  [%s] request_id=%s msg=%q method=GET path=/v1/items/%d status=200 latency_ms=%d line=%d\n",
				t.Format(time.RFC3339Nano), svc, reqID, "request served", r.IntN(10000), r.IntN(120)+1, i+1)
		}
	}
	return b.String()
}

// GenJSON returns a deterministic, indented JSON inventory object with n
// items.
func GenJSON(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 2))
	type item struct {
		ID       int      `json:"id"`
		Name     string   `json:"name"`
		Status   string   `json:"status"`
		Price    float64  `json:"price"`
		Tags     []string `json:"tags"`
		Created  string   `json:"created"`
		Owner    string   `json:"owner"`
		Quantity int      `json:"quantity"`
	}
	statuses := []string{"active", "archived", "pending"}
	tags := []string{"red", "green", "blue", "sale", "new", "bulk"}
	items := make([]item, n)
	for i := range items {
		items[i] = item{
			ID: i + 1, Name: fmt.Sprintf("item-%05d", i+1), Status: statuses[r.IntN(len(statuses))],
			Price: float64(r.IntN(100000)) / 100, Tags: []string{tags[r.IntN(len(tags))], tags[r.IntN(len(tags))]},
			Created: genBase().Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
			Owner:   fmt.Sprintf("user%d@example.com", r.IntN(50)), Quantity: r.IntN(1000),
		}
	}
	b, err := json.MarshalIndent(map[string]any{
		"kind": "inventory", "count": n, "generated": genBase().Format(time.RFC3339), "items": items,
	}, "", "  ")
	if err != nil { // cannot happen: plain values
		panic(err)
	}
	return string(b)
}

// GenCSV returns deterministic CSV text with a header row and n data rows
// (quoted fields included).
func GenCSV(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 3))
	var b strings.Builder
	w := csv.NewWriter(&b)
	regions := []string{"eu-west", "us-east", "ap-south"}
	_ = w.Write([]string{"id", "date", "region", "product", "units", "revenue", "note"})
	for i := range n {
		_ = w.Write([]string{
			strconv.Itoa(i + 1),
			genBase().AddDate(0, 0, i%365).Format(time.DateOnly),
			regions[r.IntN(len(regions))],
			fmt.Sprintf("SKU-%04d", r.IntN(500)),
			strconv.Itoa(r.IntN(100)),
			strconv.FormatFloat(float64(r.IntN(1000000))/100, 'f', 2, 64),
			[]string{"", "promo, spring", `said "ok"`}[r.IntN(3)],
		})
	}
	w.Flush()
	return b.String()
}

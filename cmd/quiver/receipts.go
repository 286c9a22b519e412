package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/spf13/cobra"
)

// receiptsFlags are the flags shared by `quiver receipts query` and
// `quiver receipts tail`.
type receiptsFlags struct {
	dir, cfgFile              string
	sub, tool, result, method string
	since                     time.Duration
	from, to                  string
	asJSON                    bool
}

func (f *receiptsFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "receipts directory (default: state_dir/receipts of the configuration)")
	fl.StringVar(&f.cfgFile, "config", "", "configuration file whose state_dir holds the receipts")
	fl.StringVar(&f.sub, "sub", "", "only receipts of this principal subject")
	fl.StringVar(&f.tool, "tool", "", "only receipts whose tool_id matches this glob ('*', '?')")
	fl.StringVar(&f.result, "result", "", "only receipts with this decision: allow, deny or require_approval")
	fl.StringVar(&f.method, "method", "", "only receipts of this MCP method (e.g. tools/call:tool_execute)")
	fl.DurationVar(&f.since, "since", 0, "only receipts of the last DURATION (e.g. 1h)")
	fl.StringVar(&f.from, "from", "", "only receipts at or after this time (RFC 3339 or YYYY-MM-DD, UTC)")
	fl.StringVar(&f.to, "to", "", "only receipts before this time (RFC 3339 or YYYY-MM-DD, UTC)")
	fl.BoolVar(&f.asJSON, "json", false, "print receipts as JSON lines, as stored")
}

// filter builds the receipts filter of the flags.
func (f *receiptsFlags) filter(now time.Time) (receipts.Filter, error) {
	flt := receipts.Filter{Sub: f.sub, ToolID: f.tool, Result: f.result, Method: f.method}
	switch f.result {
	case "", "allow", "deny", "require_approval":
	default:
		return flt, fmt.Errorf("--result must be allow, deny or require_approval, not %q", f.result)
	}
	var err error
	if f.from != "" {
		if flt.From, err = parseWhen(f.from); err != nil {
			return flt, fmt.Errorf("--from: %w", err)
		}
	}
	if f.to != "" {
		if flt.To, err = parseWhen(f.to); err != nil {
			return flt, fmt.Errorf("--to: %w", err)
		}
	}
	if f.since > 0 {
		if s := now.Add(-f.since); s.After(flt.From) {
			flt.From = s
		}
	} else if f.since < 0 {
		return flt, errors.New("--since must be positive")
	}
	return flt, nil
}

// parseWhen reads an RFC 3339 time or a UTC date.
func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor YYYY-MM-DD", s)
}

// receiptsDir resolves the receipts directory: --dir, else state_dir of
// --config (or of the configuration found as `quiver config check` finds
// it, or the default state directory) plus /receipts.
func (f *receiptsFlags) receiptsDir() (string, error) {
	if f.dir != "" {
		return f.dir, nil
	}
	cfg := config.Default()
	file := f.cfgFile
	if file == "" {
		file = findConfig()
	}
	if file != "" {
		c, err := config.Load(file)
		if err != nil {
			return "", err
		}
		cfg = c
	}
	if cfg.StateDir == "" {
		return "", errors.New("no state directory is known: give --dir")
	}
	return filepath.Join(cfg.StateDir, receipts.DirName), nil
}

// printer writes receipts as text or JSON lines.
type printer struct {
	w      io.Writer
	asJSON bool
}

func (p printer) print(r receipts.Receipt) error {
	if p.asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	sub := r.Principal.Sub
	if sub == "" {
		sub = "-"
	}
	tool := r.MCP.ToolID
	if tool == "" {
		tool = "-"
	}
	codes := strings.Join(r.Decision.ReasonCodes, ",")
	if codes == "" {
		codes = "-"
	}
	outcome := r.Outcome.Status
	if r.Outcome.ErrorCode != "" {
		outcome += "/" + r.Outcome.ErrorCode
	}
	incident := ""
	if r.IncidentMode {
		incident = "  INCIDENT"
	}
	_, err := fmt.Fprintf(p.w, "%s  %-16s  %-24s  %s  sub=%s  %s  %s  %.1fms%s\n",
		r.TS.UTC().Format("2006-01-02T15:04:05.000Z"), r.Decision.Result, r.MCP.Method, tool, sub, codes, outcome,
		r.Outcome.DurationMS, incident)
	return err
}

func newReceiptsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "Read the receipts quiver writes for every decision",
		Long: `Read the receipts of state_dir/receipts: one JSON line per gateway decision
(allow, deny or require_approval), in daily files receipts-YYYY-MM-DD.jsonl (UTC).`,
	}
	cmd.AddCommand(newReceiptsQueryCmd(), newReceiptsTailCmd())
	return cmd
}

func newReceiptsQueryCmd() *cobra.Command {
	var f receiptsFlags
	var limit int
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Print the receipts that match the filters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := f.filter(time.Now())
			if err != nil {
				return usageError(err)
			}
			dir, err := f.receiptsDir()
			if err != nil {
				return usageError(err)
			}
			if limit < 0 {
				return usageError(errors.New("--limit must not be negative"))
			}
			out := printer{w: cmd.OutOrStdout(), asJSON: f.asJSON}
			rd := receipts.Reader{Dir: dir}
			n := 0
			return rd.Query(cmd.Context(), flt, func(r receipts.Receipt) error {
				if err := out.print(r); err != nil {
					return err
				}
				n++
				if limit > 0 && n >= limit {
					return receipts.ErrStop
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most N receipts (0: all)")
	return cmd
}

func newReceiptsTailCmd() *cobra.Command {
	var f receiptsFlags
	var n int
	var follow bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the last receipts that match the filters; with -f, keep printing new ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := f.filter(time.Now())
			if err != nil {
				return usageError(err)
			}
			dir, err := f.receiptsDir()
			if err != nil {
				return usageError(err)
			}
			if n < 0 {
				return usageError(errors.New("-n must not be negative"))
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			out := printer{w: cmd.OutOrStdout(), asJSON: f.asJSON}
			rd := receipts.Reader{Dir: dir}
			last, err := rd.Last(ctx, flt, n)
			if err != nil && !(follow && errors.Is(err, os.ErrNotExist)) {
				return err
			}
			for _, r := range last {
				if err := out.print(r); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return rd.Follow(ctx, flt, poll, out.print)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "print the last N receipts")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing receipts as they are written, until interrupted")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often -f looks for new receipts")
	return cmd
}

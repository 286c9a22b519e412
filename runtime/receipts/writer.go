package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Writer defaults.
const (
	DefaultQueueSize     = 4096
	DefaultBatchSize     = 256
	DefaultFlushInterval = 200 * time.Millisecond
)

// DirName is the directory under the state directory that holds the
// receipts files.
const DirName = "receipts"

// FilePrefix and FileSuffix frame a receipts file name:
// receipts-YYYY-MM-DD.jsonl (UTC day of the receipts it holds).
const (
	FilePrefix = "receipts-"
	FileSuffix = ".jsonl"
	dayLayout  = "2006-01-02"
)

// FileName returns the name of the file that holds receipts of day t (UTC).
func FileName(t time.Time) string { return FilePrefix + t.UTC().Format(dayLayout) + FileSuffix }

// ErrClosed is returned by Flush on a closed Writer.
var ErrClosed = errors.New("receipts writer closed")

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Dir holds the daily files (created 0700, files 0600); "" writes no
	// files (Copy only).
	Dir string
	// Copy, when set, receives every line too (for example os.Stdout).
	// Its failures are logged and counted like file failures.
	Copy io.Writer
	// QueueSize bounds the receipts waiting to be written (default
	// 4096); when it is full, Emit drops the receipt and counts it.
	QueueSize int
	// BatchSize writes a batch as soon as this many receipts wait
	// (default 256).
	BatchSize int
	// FlushInterval writes what waits at least this often (default
	// 200 ms).
	FlushInterval time.Duration
	// Now is the clock that stamps receipts without a ts (default
	// time.Now). Files are chosen by each receipt's own ts.
	Now func() time.Time
	// Logger receives drops and write failures (default: discarded).
	Logger *slog.Logger
}

// Stats are a Writer's counters since it started.
type Stats struct {
	// Emitted counts receipts accepted into the queue.
	Emitted uint64
	// Written counts receipts written and fsync'd to a file (or to Copy
	// when there is no Dir).
	Written uint64
	// Dropped counts receipts refused because the queue was full or the
	// writer closed.
	Dropped uint64
	// WriteErrors counts failed writes, fsyncs and opens (of files or of
	// Copy).
	WriteErrors uint64
	// Batches counts batches written.
	Batches uint64
}

// Writer appends receipts to daily JSONL files. Emit never blocks on I/O
// and never fails the caller: receipts go through a bounded queue to one
// background flusher goroutine, which the Writer owns and Close ends.
// Batches are written with one write and one fsync per file.
type Writer struct {
	o     WriterOptions
	log   *slog.Logger
	queue chan Receipt
	flush chan chan error
	stop  chan struct{}
	done  chan struct{}

	closeMu sync.RWMutex // Emit holds it shared; Close exclusively
	closed  bool

	emitted, written, dropped, writeErrors, batches atomic.Uint64
	lastDropLog                                     atomic.Int64 // unix nanos

	// Owned by the flusher goroutine.
	file    *os.File
	fileDay string
}

// NewWriter creates Dir and starts the flusher.
func NewWriter(o WriterOptions) (*Writer, error) {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
	}
	w := &Writer{o: o, log: log, queue: make(chan Receipt, o.QueueSize), flush: make(chan chan error),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// Emit queues r for writing and returns at once. It completes r first
// (ts, receipt_id, trace_id when missing; enums, sizes and text bounded;
// the outcome message redacted). When the queue is full, or the writer is
// closed, r is dropped and counted (see Stats); the caller is never
// failed.
func (w *Writer) Emit(r Receipt) {
	r.normalize(w.o.Now())
	w.closeMu.RLock()
	defer w.closeMu.RUnlock()
	if w.closed {
		w.drop("writer closed")
		return
	}
	select {
	case w.queue <- r:
		w.emitted.Add(1)
	default:
		w.drop("queue full")
	}
}

// drop counts a dropped receipt and logs, at most once every 10 seconds.
func (w *Writer) drop(why string) {
	n := w.dropped.Add(1)
	now := time.Now().UnixNano()
	last := w.lastDropLog.Load()
	if now-last >= int64(10*time.Second) && w.lastDropLog.CompareAndSwap(last, now) {
		w.log.Error("receipt dropped", "why", why, "dropped_total", n)
	}
}

// Stats returns the counters.
func (w *Writer) Stats() Stats {
	return Stats{Emitted: w.emitted.Load(), Written: w.written.Load(), Dropped: w.dropped.Load(),
		WriteErrors: w.writeErrors.Load(), Batches: w.batches.Load()}
}

// Flush writes every receipt emitted before the call and waits until it
// is fsync'd. It returns the write error of that batch, if any (Emit's
// callers never see it), or ErrClosed.
func (w *Writer) Flush() error {
	reply := make(chan error, 1)
	select {
	case w.flush <- reply:
		return <-reply
	case <-w.done:
		return ErrClosed
	}
}

// Close writes what is queued, closes the current file and stops the
// flusher. Receipts emitted after Close are dropped. Close is idempotent.
func (w *Writer) Close() error {
	w.closeMu.Lock()
	already := w.closed
	w.closed = true
	w.closeMu.Unlock()
	if !already {
		close(w.stop)
	}
	<-w.done
	return nil
}

// run is the flusher goroutine.
func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(w.o.FlushInterval)
	defer t.Stop()
	batch := make([]Receipt, 0, w.o.BatchSize)
	for {
		select {
		case r := <-w.queue:
			batch = append(batch, r)
			if len(batch) >= w.o.BatchSize {
				_ = w.write(batch)
				batch = batch[:0]
			}
		case <-t.C:
			if len(batch) > 0 {
				_ = w.write(batch)
				batch = batch[:0]
			}
		case reply := <-w.flush:
			batch = w.drain(batch)
			reply <- w.write(batch)
			batch = batch[:0]
		case <-w.stop:
			// Emit cannot add more: closed is set under the lock.
			batch = w.drain(batch)
			_ = w.write(batch)
			w.closeFile()
			return
		}
	}
}

// drain moves everything queued into batch.
func (w *Writer) drain(batch []Receipt) []Receipt {
	for {
		select {
		case r := <-w.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
}

// write writes a batch: each run of receipts of one UTC day goes to that
// day's file with one write and one fsync. Failures are logged and
// counted; the first is returned (for Flush).
func (w *Writer) write(batch []Receipt) error {
	if len(batch) == 0 {
		return nil
	}
	w.batches.Add(1)
	var first error
	fail := func(err error) {
		w.writeErrors.Add(1)
		w.log.Error("receipt write failed", "err", err)
		if first == nil {
			first = err
		}
	}
	var buf bytes.Buffer
	for i := 0; i < len(batch); {
		day := batch[i].TS.UTC().Format(dayLayout)
		buf.Reset()
		n := 0
		for ; i < len(batch) && batch[i].TS.UTC().Format(dayLayout) == day; i++ {
			line, err := json.Marshal(batch[i])
			if err != nil {
				fail(fmt.Errorf("encoding receipt %s: %w", batch[i].ReceiptID, err))
				continue
			}
			buf.Write(line)
			buf.WriteByte('\n')
			n++
		}
		if w.o.Copy != nil {
			if _, err := w.o.Copy.Write(buf.Bytes()); err != nil {
				fail(fmt.Errorf("copying receipts: %w", err))
			}
		}
		if w.o.Dir == "" {
			w.written.Add(uint64(n))
			continue
		}
		if err := w.writeDay(day, buf.Bytes()); err != nil {
			fail(err)
			continue
		}
		w.written.Add(uint64(n))
	}
	return first
}

// writeDay appends data to day's file and fsyncs it, switching files when
// the day changes.
func (w *Writer) writeDay(day string, data []byte) error {
	if w.file == nil || w.fileDay != day {
		w.closeFile()
		path := filepath.Join(w.o.Dir, FilePrefix+day+FileSuffix)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("opening %s: %w", path, err)
		}
		w.file, w.fileDay = f, day
	}
	if _, err := w.file.Write(data); err != nil {
		// Reopen next time: the file may have been removed or rotated.
		w.closeFile()
		return fmt.Errorf("writing receipts: %w", err)
	}
	if err := w.file.Sync(); err != nil {
		w.closeFile()
		return fmt.Errorf("syncing receipts: %w", err)
	}
	return nil
}

func (w *Writer) closeFile() {
	if w.file == nil {
		return
	}
	if err := w.file.Close(); err != nil {
		w.writeErrors.Add(1)
		w.log.Error("closing receipts file", "err", err)
	}
	w.file, w.fileDay = nil, ""
}

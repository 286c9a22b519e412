package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Crash test protocol: the parent re-executes this test binary running only
// TestHelperCrashWriter, with crashDirEnv naming the store directory. The child
// writes artifacts from several goroutines and prints one line per Put that
// returned; the parent SIGKILLs it mid-stream, reopens the store and checks.
const (
	crashDirEnv   = "QUIVER_ARTIFACTS_CRASH_DIR"
	crashRoundEnv = "QUIVER_ARTIFACTS_CRASH_ROUND"
	crashChunk    = 16 << 10
	crashLine     = "COMMITTED"
)

func crashOptions(dir string) Options {
	return Options{Dir: dir, SweepInterval: -1, MaxBytes: 1 << 30, chunkSize: crashChunk}
}

// crashSize is the size of the artifact for seed: mostly multi-chunk (staged
// path), some single-chunk (one-transaction path), some empty.
func crashSize(seed uint64) int {
	switch seed % 5 {
	case 0:
		return int(seed % 3000)
	case 1:
		return 0
	default:
		return int(seed%40)*crashChunk + int(seed%crashChunk)
	}
}

// TestHelperCrashWriter is the child process of TestCrashRecovery; it does
// nothing in a normal test run.
func TestHelperCrashWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashRecovery")
	}
	round, _ := strconv.ParseUint(os.Getenv(crashRoundEnv), 10, 64)
	s, err := OpenBadger(crashOptions(dir))
	if err != nil {
		fmt.Printf("OPEN FAILED %v\n", err)
		os.Exit(3)
	}
	var out sync.Mutex
	deadline := time.Now().Add(60 * time.Second) // never outlive a vanished parent
	var wg sync.WaitGroup
	for w := range uint64(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(round, w))
			for i := uint64(0); time.Now().Before(deadline); i++ {
				seed := round<<32 | w<<24 | i
				if i%4 == 3 {
					seed = round<<32 | w<<24 | r.Uint64N(i) // content seen before: dedup
				}
				owner := fmt.Sprintf("principal-%d", r.IntN(3))
				data := content(seed, crashSize(seed))
				in := PutInput{MediaType: "application/octet-stream", Label: strconv.FormatUint(seed, 10)}
				if r.IntN(2) == 0 {
					in.Data = data
				} else {
					in.Body, in.Size = bytes.NewReader(data), int64(len(data))
				}
				m, err := s.Put(context.Background(), owner, in)
				if err != nil {
					fmt.Printf("PUT FAILED %v\n", err)
					os.Exit(4)
				}
				out.Lock()
				fmt.Printf("%s %s %s %d %d %s\n", crashLine, owner, m.Handle, seed, m.SizeBytes, m.ContentHash)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

type committed struct {
	owner, handle, hash string
	seed                uint64
	size                int64
}

// TestCrashRecovery kills a writing child process with SIGKILL, three times over
// the same directory, and checks after each kill that every artifact the child
// reported is readable byte-exact with the right sha256, that every visible
// artifact is complete and correct, and that no half-written chunk survives.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	var all []committed
	for round := range 3 {
		got := runCrashChild(t, dir, round, 12+4*round)
		all = append(all, got...)

		s, err := OpenBadger(crashOptions(dir))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		t.Logf("round %d: child reported %d puts before SIGKILL; recovery deleted %d uncommitted blobs", round, len(got), s.recovered)
		ctx := context.Background()
		for _, c := range all {
			m, err := s.Stat(ctx, c.owner, c.handle)
			if err != nil {
				t.Fatalf("round %d: reported handle %s: %v", round, c.handle, err)
			}
			if m.ContentHash != c.hash || m.SizeBytes != c.size || m.Label != strconv.FormatUint(c.seed, 10) {
				t.Fatalf("round %d: %s meta %+v, reported %+v", round, c.handle, m, c)
			}
			data, err := readAll(ctx, s, c.owner, c.handle)
			if err != nil || sha(data) != c.hash || !bytes.Equal(data, content(c.seed, crashSize(c.seed))) {
				t.Fatalf("round %d: %s reads back wrong (%v)", round, c.handle, err)
			}
		}
		// Every visible artifact, reported or not (the kill can land between a
		// commit and its line), is complete and correct; nothing else is stored.
		st := checkInvariants(t, s)
		for mk, rec := range st.metas {
			seed, err := strconv.ParseUint(rec.Label, 10, 64)
			if err != nil {
				t.Fatalf("label %q", rec.Label)
			}
			handle := mk[len(prefixMeta)+ownerKeyLen:]
			want := content(seed, crashSize(seed))
			data, err := readAll(ctx, s, rec.Owner, handle)
			if err != nil || !bytes.Equal(data, want) {
				t.Fatalf("round %d: visible artifact %s (seed %d) reads back wrong: %v", round, handle, seed, err)
			}
		}
		if len(st.metas) < len(all) {
			t.Fatalf("round %d: %d visible artifacts, %d reported", round, len(st.metas), len(all))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runCrashChild starts the writer, reads until it has reported want puts,
// SIGKILLs it and returns what it reported.
func runCrashChild(t *testing.T, dir string, round, want int) []committed {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round+1))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var got []committed
	sc := bufio.NewScanner(stdout)
	for len(got) < want && sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != crashLine {
			if strings.Contains(line, "FAILED") {
				t.Fatalf("child: %s", line)
			}
			continue
		}
		if len(f) != 6 {
			t.Fatalf("bad line %q", line)
		}
		seed, err1 := strconv.ParseUint(f[3], 10, 64)
		size, err2 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", line)
		}
		got = append(got, committed{owner: f[1], handle: f[2], seed: seed, size: size, hash: f[5]})
	}
	if len(got) < want {
		t.Fatalf("child stopped after %d puts: %v", len(got), sc.Err())
	}
	// SIGKILL: no deferred code, no Badger Close, mid-write of the other goroutines.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	return got
}

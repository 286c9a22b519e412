package state_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

const helperEnv = "QUIVER_STATE_TEST_HELPER_DIR"

// TestHelperProcess is a quiver process for TestMultiProcess, run as a
// child of the test binary. It reads commands on stdin and answers one
// line each on stdout.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only a helper for TestMultiProcess")
	}
	out := bufio.NewWriter(os.Stdout)
	var omu sync.Mutex
	say := func(f string, a ...any) {
		omu.Lock()
		defer omu.Unlock()
		fmt.Fprintf(out, f+"\n", a...)
		out.Flush()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := state.OpenEmbedded(ctx, state.EmbeddedOptions{Dir: dir})
	if err != nil {
		say("fatal %v", err)
		os.Exit(1)
	}
	say("ready %v", state.IsOwner(b))
	kv := b.KV()
	me := strconv.Itoa(os.Getpid())
	var stop chan struct{}
	var writer sync.WaitGroup
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "create":
			ok, err := kv.Create(ctx, "once", []byte(me), 0)
			say("create %v %v", ok, err)
		case "admit":
			n := 0
			for range 10 {
				r, err := kv.Admit(ctx, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{15}, Window: time.Hour, Now: time.Now(), Take: true})
				if err != nil {
					say("fatal %v", err)
				}
				if r.Denied == -1 {
					n++
				}
			}
			say("admit %d", n)
		case "write":
			stop = make(chan struct{})
			writer.Add(1)
			go func() {
				defer writer.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("rec/%s/%d", me, i)
					c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := kv.Set(c, key, []byte("v"), 0)
					cancel()
					if err != nil {
						say("err %s %v", key, err)
						continue
					}
					say("ok %s", key)
					time.Sleep(2 * time.Millisecond)
				}
			}()
		case "stop":
			close(stop)
			writer.Wait()
			say("done %v", state.IsOwner(b))
		case "exit":
			b.Close()
			os.Exit(0)
		}
	}
	os.Exit(0)
}

type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, dir string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, lines: make(chan string, 1<<16)}
	go func() {
		defer close(c.lines)
		s := bufio.NewScanner(outp)
		for s.Scan() {
			c.lines <- s.Text()
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return c
}

func (c *child) send(t *testing.T, cmd string) {
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
}

// expect returns the next line starting with prefix (skipping others,
// which it hands to skip).
func (c *child) expect(t *testing.T, prefix string, skip func(string)) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited, waiting for %q", prefix)
			}
			if strings.HasPrefix(l, "fatal") {
				t.Fatalf("child: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
			if skip != nil {
				skip(l)
			}
		case <-timeout:
			t.Fatalf("no %q from the child", prefix)
		}
	}
}

// TestMultiProcess runs four quiver processes on one state dir: all start,
// share one state, and carry on when the owner is killed with SIGKILL,
// losing no acknowledged write.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	kids := make([]*child, 4)
	for i := range kids {
		kids[i] = startChild(t, dir)
	}
	owner := -1
	for i, k := range kids {
		if k.expect(t, "ready ", nil) == "true" {
			if owner >= 0 {
				t.Fatal("two owners")
			}
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no owner")
	}

	for _, k := range kids {
		k.send(t, "create")
	}
	won := 0
	for _, k := range kids {
		switch r := k.expect(t, "create ", nil); r {
		case "true <nil>":
			won++
		case "false <nil>":
		default:
			t.Fatalf("create: %s", r)
		}
	}
	if won != 1 {
		t.Fatalf("%d processes created the same key", won)
	}

	for _, k := range kids {
		k.send(t, "admit")
	}
	admitted := 0
	for _, k := range kids {
		n, _ := strconv.Atoi(k.expect(t, "admit ", nil))
		admitted += n
	}
	if admitted != 15 {
		t.Fatalf("%d of 40 calls admitted under a shared limit of 15", admitted)
	}

	// Every process writes records; the owner is killed mid-run.
	var acked []string
	var errs int
	record := func(l string) {
		if k, ok := strings.CutPrefix(l, "ok "); ok {
			acked = append(acked, k)
		} else if strings.HasPrefix(l, "err ") {
			errs++
		}
	}
	for _, k := range kids {
		k.send(t, "write")
	}
	for _, k := range kids {
		for range 5 {
			record("ok " + k.expect(t, "ok ", record))
		}
	}
	if err := kids[owner].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	kids[owner].cmd.Wait()
	for l := range kids[owner].lines {
		record(l)
	}
	for i, k := range kids {
		if i != owner {
			for range 20 {
				record("ok " + k.expect(t, "ok ", record))
			}
		}
	}
	newOwners := 0
	for i, k := range kids {
		if i == owner {
			continue
		}
		k.send(t, "stop")
		if k.expect(t, "done ", record) == "true" {
			newOwners++
		}
	}
	if newOwners != 1 {
		t.Fatalf("%d owners after the kill, want 1", newOwners)
	}
	for i, k := range kids {
		if i != owner {
			k.send(t, "exit")
			for l := range k.lines {
				record(l)
			}
			k.cmd.Wait()
		}
	}
	t.Logf("%d acknowledged writes, %d failed across the kill", len(acked), errs)

	// Every acknowledged write survived the kill.
	b := open(t, dir)
	c := tctx(t)
	for _, k := range acked {
		if _, err := b.KV().Get(c, k); err != nil {
			t.Errorf("acknowledged %s: %v", k, err)
		}
	}
}

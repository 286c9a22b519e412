package benchmarks

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a benchmark ran.
type Machine struct {
	// CPUs, CPUModel, GOOS, GOARCH, Go (version) and GOMAXPROC describe
	// the machine and toolchain; Date is the UTC day of the run.
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	Go        string `json:"go"`
	GOMAXPROC int    `json:"gomaxprocs"`
	// LoadAvg is /proc/loadavg's 1-minute figure at the start of the run,
	// empty where /proc is absent: the machine may be shared with other
	// jobs, which shows in the tails.
	LoadAvg string `json:"load_avg,omitempty"`
	Date    string `json:"date"`
}

// ThisMachine returns the description of the running machine.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(),
		GOMAXPROC: runtime.GOMAXPROCS(0), Date: time.Now().UTC().Format(time.DateOnly)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAvg = f[0]
		}
	}
	return m
}

package config

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// CheckPrograms reports the first enabled command upstream whose program
// cannot be started: not found on PATH (a bare name), or not an
// executable file (a path, relative ones taken from the upstream's
// working directory). lookPath is exec.LookPath in production. A file that
// loads can still name a program this machine lacks; serve would only
// find out when it starts the upstream.
func (c *Config) CheckPrograms(lookPath func(string) (string, error)) error {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	for i, u := range c.Upstreams {
		if !u.Enabled || len(u.Command) == 0 {
			continue
		}
		prog := u.Command[0]
		if strings.ContainsRune(prog, filepath.Separator) && !filepath.IsAbs(prog) && u.Dir != "" {
			prog = filepath.Join(u.Dir, prog)
		}
		if _, err := lookPath(prog); err != nil {
			where := "is not on PATH"
			if strings.ContainsRune(prog, filepath.Separator) {
				where = "is not an executable file"
			}
			field := "upstreams[" + strconv.Itoa(i) + "].command[0]"
			if c.Imported != nil && i < len(c.Imported.Origins) {
				field = c.Imported.Origins[i] + ".command"
			}
			return &Error{File: c.Source, Field: field,
				Msg: fmt.Sprintf("%q %s (upstream %q)", oneLine(prog), where, u.Name), Err: err}
		}
	}
	return nil
}

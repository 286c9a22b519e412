//go:build unix

package runtime

import (
	"os"
	"syscall"
)

// inode is a file's inode number (an atomic rename changes it).
func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

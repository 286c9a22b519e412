//go:build !unix

package runtime

import "os"

// inode is 0 where the platform gives none.
func inode(os.FileInfo) uint64 { return 0 }

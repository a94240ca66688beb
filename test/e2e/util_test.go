package e2e

import "os"

// statFile is os.Stat, named for what the tests ask: does the host have this file.
func statFile(path string) (os.FileInfo, error) { return os.Stat(path) }

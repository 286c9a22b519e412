//go:build race

package main

// raceEnabled builds the binaries under test with the race detector when
// the tests themselves run with it.
const raceEnabled = true

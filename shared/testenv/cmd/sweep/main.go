// Command sweep kills control-plane processes and removes scratch directories left behind
// by test runs that were killed mid-run; `make test` runs it first.
package main

import (
	"fmt"
	"os"

	"github.com/opsuite/suite/shared/testenv"
)

func main() {
	bin, err := testenv.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
	testenv.Sweep(bin)
}

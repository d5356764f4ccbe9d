// Command veltrix-sim stands in for the VeltrixDB server in tests and on the local
// cluster; see README.md for what it models and what it does not.
package main

import (
	"fmt"
	"os"

	"github.com/opsuite/suite/tools/internal/veltrixsim"
)

func main() {
	err := run()
	code := veltrixsim.ExitCode(err)
	if code != 0 {
		fmt.Fprintln(os.Stderr, "veltrix-sim:", err)
	}
	os.Exit(code)
}

func run() error {
	return veltrixsim.RunProcess(os.Args[1:])
}

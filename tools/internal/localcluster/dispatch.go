package localcluster

import (
	"errors"
	"flag"
	"fmt"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

// Dispatch runs the subcommands the cluster starts its own binary with: "daemon" (from
// Up) and the pod helper (from the process runner). It reports false for anything else.
// Tests call it from TestMain so that the test binary can serve as the daemon.
func Dispatch(args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case podrunner.HelperCommand:
		if len(args) != 2 {
			return true, errors.New("podexec takes one spec file")
		}
		return true, podrunner.ExecInNamespace(args[1])
	case "daemon":
		fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
		dir := fs.String("dir", "", "cluster directory")
		fs.String("repo", "", "repository root (unused; the options carry it)")
		if err := fs.Parse(args[1:]); err != nil {
			return true, err
		}
		o, err := LoadOptions(*dir)
		if err != nil {
			return true, fmt.Errorf("reading the options `up` saved: %w", err)
		}
		return true, RunDaemon(o)
	}
	return false, nil
}

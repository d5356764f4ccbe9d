package e2e

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// A shard is a part of the suite run on a local cluster of its own. `make test` runs the
// shards at once: the suite spends most of its time waiting on its cluster, so two clusters
// halve its wall time on two cores. Every test belongs to exactly one shard, apart from the
// ones each cluster needs (the install, the RBAC audit and the uninstall): one shard names
// its tests with a pattern, the other runs everything that pattern leaves.
type shard struct {
	// instance is the local-cluster instance the shard starts unless E2E_INSTANCE is set.
	instance int
	// run and skip are the shard's -test.run and -test.skip patterns.
	run, skip string
	// audits says whether TestRBACMatchesUse checks this operator's grants here: only the
	// operators whose scenarios the shard runs use all of their grants on its cluster.
	audits func(operator string) bool
}

// valkeyTests are the Valkey shard's own tests: every Valkey test (TestValkey*) and the
// chaos run of all four products, whose VeltrixDB cluster takes disks no other test here
// uses.
const valkeyTests = `Valkey.*|Chaos`

// shards by E2E_SHARD. Unset runs the whole suite on one cluster.
var shards = map[string]shard{
	"valkey": {
		instance: defaultInstance,
		run:      `^Test(Install|` + valkeyTests + `|RBACMatchesUse|UninstallRemovesEverything)$`,
		audits:   func(op string) bool { return op == "valkey-operator" },
	},
	"others": {
		instance: defaultInstance + 1,
		skip:     `^Test(` + valkeyTests + `)$`,
		audits:   func(op string) bool { return op != "valkey-operator" },
	},
}

// current is the shard this run is (E2E_SHARD), zero for the whole suite.
var current struct {
	name string
	shard
}

// selectShard reads E2E_SHARD and sets the test binary's -test.run and -test.skip to its
// patterns. It refuses a run that gives its own patterns too: the shard would not be what
// its name says.
func selectShard() error {
	name := os.Getenv("E2E_SHARD")
	if name == "" {
		return nil
	}
	s, ok := shards[name]
	if !ok {
		var names []string
		for n := range shards {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Errorf("E2E_SHARD=%q: want one of %s, or unset for the whole suite", name, strings.Join(names, ", "))
	}
	for _, f := range []string{"test.run", "test.skip"} {
		if v := flag.Lookup(f).Value.String(); v != "" {
			return fmt.Errorf("E2E_SHARD=%s picks the tests itself: drop -%s %q, or E2E_SHARD", name, strings.TrimPrefix(f, "test."), v)
		}
	}
	if err := flag.Set("test.run", s.run); err != nil {
		return err
	}
	if err := flag.Set("test.skip", s.skip); err != nil {
		return err
	}
	current.name, current.shard = name, s
	return nil
}

// audited says whether this run's RBAC audit checks the operator.
func audited(operator string) bool {
	return current.audits == nil || current.audits(operator)
}

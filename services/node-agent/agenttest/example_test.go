package agenttest_test

import (
	"context"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/shared/nodeagent"
)

// An operator's integration test: TestMain calls agenttest.PrivateMountNamespace() and then
// testenv.Main; the test runs one agent per node it pretends to have, attaches their disks,
// and hands the pool to the reconciler it tests in place of NewForManager's.
func ExampleStart() {
	var t testing.TB // the test's
	a := agenttest.Start(t, agenttest.Options{Node: "node-a", NoAuth: true, Labels: map[string]string{"pool.opsuite.io/type": "nvme"}})
	dev := a.AttachLoop(512 << 20)
	pool := agenttest.Pool(t, nodeagent.StaticToken("unused"), a)
	_, _ = pool.Node("node-a").PrepareDisks(context.Background(), &nodeagentv1.PrepareDisksRequest{
		Selector: &nodeagentv1.DeviceSelector{Paths: []string{dev}}, PvPath: a.PV("data"),
	})
}

package server_test

import (
	"os"
	"testing"

	"github.com/opsuite/suite/services/node-agent/agenttest"
)

// TestMain re-runs the test binary in a private mount namespace (as agenttest does for the
// in-process agents), so that every mount a test makes dies with the process and never
// reaches the host.
func TestMain(m *testing.M) {
	agenttest.PrivateMountNamespace()
	os.Exit(m.Run())
}

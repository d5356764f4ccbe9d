// Package e2e is the end-to-end suite (tests only): it starts the local cluster once
// (tools/internal/localcluster, in a temporary directory on its own ports) or uses the
// cluster E2E_KUBECONFIG names, installs every chart in charts/ with the pinned helm, and
// checks the operators and the node agent as they run there.
//
//	cd tools/e2e && go test -count=1 -v -timeout 40m ./...
//
// make test runs it as two shards at once, each on a local cluster of its own
// (E2E_SHARD=valkey and E2E_SHARD=others; shard_test.go says which tests each runs).
//
// Environment: E2E_KUBECONFIG (use an existing cluster; checks that need the local process
// runner skip with their reason), E2E_SHARD (one shard of the suite), E2E_INSTANCE /
// E2E_PORT_BASE (local cluster instance or ports), E2E_UPGRADE_TAG (second image tag for
// the upgrade check), HELM, KUBECTL.
package e2e

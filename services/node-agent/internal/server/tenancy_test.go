package server_test

import (
	"context"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"google.golang.org/grpc/codes"
)

// TestTenancy is the agent's half of issue 19 item 3: a node whose pool label names a
// namespace lends its disks to that namespace only. A request for another namespace, or for
// none, is refused before any device is looked at; a release may omit the namespace but not
// name another one, the node's or the record's.
func TestTenancy(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t) // the node's label pool.opsuite.io/namespace is "search"
	dev := newLoop(t, e.root, 512*mib)
	for ns, want := range map[string]string{
		"other": `lends its disks only to namespace "search" (label pool.opsuite.io/namespace), not to "other"`,
		"":      "the request names no namespace",
	} {
		req := prepareReq(e.pv("v"), 0, dev)
		req.Namespace = ns
		_, err := e.srv.PrepareDisks(ctx, req)
		wantCode(t, err, codes.PermissionDenied, want)
	}
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("refused request wrote the device: %v", sig)
	}
	req := prepareReq(e.pv("v"), 0, dev)
	req.Namespace = "Bad_NS"
	_, err := e.srv.PrepareDisks(ctx, req)
	wantCode(t, err, codes.InvalidArgument, "not a Kubernetes namespace name")

	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev)); err != nil {
		t.Fatal(err)
	}
	_, err = e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("v"), Wipe: true, Namespace: "other"})
	wantCode(t, err, codes.PermissionDenied, `not to "other"`)
	if sig := agenttest.Blkid(t, dev); sig["TYPE"] != "xfs" {
		t.Fatalf("refused release changed the device: %v", sig)
	}

	// A record keeps its namespace: once the label is gone (the node lends to all), a release
	// for another namespace still does not touch it.
	e.srv = newServerWithLabels(t, e, map[string]string{})
	_, err = e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("v"), Namespace: "other"})
	wantCode(t, err, codes.PermissionDenied, `prepared for namespace "search", not "other"`)
	rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("v"), Namespace: testNamespace})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release for its namespace: %v, %v", rel, err)
	}
}

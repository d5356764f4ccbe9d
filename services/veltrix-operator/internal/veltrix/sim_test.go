package veltrix_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
)

// The client against real simulator processes.

func TestTextProtocol(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{})
	ctx := context.Background()
	a, b := c.Server(0).Conn(), c.Server(2).Conn()
	if err := a.Ping(ctx); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := a.Put(ctx, "greeting", "hello there"); err != nil {
		t.Fatalf("PUT: %v", err)
	}
	// Any member accepts any key and routes it to its owners.
	if got, err := b.Get(ctx, "greeting"); err != nil || got != "hello there" {
		t.Fatalf("GET through another member = %q, %v; want the value with its space", got, err)
	}
	if err := b.Del(ctx, "greeting"); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	_, err := a.Get(ctx, "greeting")
	if !errors.Is(err, veltrix.ErrNotFound) || veltrix.ServerMessage(err) == "" {
		t.Fatalf("GET of a deleted key: %v, want ErrNotFound with the server's reason", err)
	}
	if err := a.Put(ctx, "two words", "x"); err == nil {
		t.Fatal("PUT of a key with a space was sent")
	}
	info, err := a.Info(ctx)
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	for _, k := range []string{"node_id", "keys", "search_ready", "members", "epoch"} {
		if _, ok := info[k]; !ok {
			t.Errorf("INFO has no %s: %v", k, info)
		}
	}
	if info["node_id"] != "vx-0" || info["members"] != "3" {
		t.Errorf("INFO node_id=%s members=%s, want vx-0 and 3", info["node_id"], info["members"])
	}
	var topo veltrix.Cluster
	if err := a.Topology(ctx, &topo); err != nil || len(topo.Nodes) != 3 {
		t.Fatalf("TOPOLOGY = %+v, %v; want 3 nodes", topo, err)
	}
}

func TestAdminAPI(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{AdminToken: "s3cret", ReplicationFactor: 1})
	ctx := context.Background()
	admin := c.Client()
	addr := c.Server(1).AdminAddr

	cl, err := admin.Cluster(ctx, addr)
	if err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	if cl.NodeID != "vx-1" || cl.Mode != "replicated" || cl.Epoch < 1 || cl.PartitionCount < 1 || len(cl.Nodes) != 3 {
		t.Fatalf("Cluster = %+v, want vx-1's view of 3 nodes", cl)
	}
	for _, n := range cl.Nodes {
		if n.Address != "127.0.0.1" || n.Port == 0 || n.State != string(veltrix.MemberActive) {
			t.Errorf("node %+v: want 127.0.0.1, a port, active", n)
		}
	}

	_, err = veltrix.New(veltrix.Options{Token: "wrong"}).Members(ctx, addr)
	if !errors.Is(err, veltrix.ErrUnauthorized) {
		t.Fatalf("Members with a wrong token: %v, want ErrUnauthorized", err)
	}
	if err := admin.RemoveMember(ctx, addr, "vx-9"); !errors.Is(err, veltrix.ErrNotFound) || veltrix.ServerMessage(err) == "" {
		t.Fatalf("RemoveMember of an unknown id: %v, want ErrNotFound with the server's reason", err)
	}
	if err := admin.Checkpoint(ctx, addr); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}

	// A member joins through POST and leaves through DELETE.
	joiner := c.Join()
	c.WaitMembers(4, nil)
	if err := admin.RemoveMember(ctx, addr, joiner.ID); err != nil {
		t.Fatalf("RemoveMember %s: %v", joiner.ID, err)
	}
	c.WaitMembers(3, []string{"vx-0", "vx-1", "vx-2"})
	if err := admin.AddMember(ctx, addr, veltrix.Member{ID: joiner.ID, Addr: joiner.Addr}); err != nil {
		t.Fatalf("AddMember %s: %v", joiner.ID, err)
	}
	ms := c.WaitMembers(4, nil)
	if got := len(ms); got != 4 {
		t.Fatalf("members after AddMember: %d, want 4", got)
	}
	info, err := admin.Info(ctx, joiner.Addr)
	if err != nil || info["members"] != strconv.Itoa(4) {
		t.Fatalf("INFO of the re-added member = %v, %v; want members=4", info, err)
	}
}

package memgraphsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The management and replication servers speak one JSON object per line each way: a
// request, then its response, on a connection the client opens per call. Memgraph uses
// its own RPC framing here; nothing outside the simulator speaks these ports, so the
// simplest framing that is easy to debug (nc) wins.

// request is every message a coordinator or a MAIN sends; Op says which fields matter.
type request struct {
	Op string `json:"op"`
	// Name is the instance name the coordinator registered the receiver under.
	Name string `json:"name,omitempty"`
	// Epoch is the coordinators' MAIN generation: raised on every promotion, so a replica
	// refuses a stale MAIN and a stale MAIN learns it is one.
	Epoch uint64 `json:"epoch,omitempty"`
	// ReplicationServer is where a replica must listen (demote).
	ReplicationServer string `json:"replication_server,omitempty"`
	// Replicas are a MAIN's replicas (promote).
	Replicas []replicaSpec `json:"replicas,omitempty"`
	// Query is a mutation a follower forwards to the leader.
	Query string `json:"query,omitempty"`
	// Replication stream.
	Prev  uint64       `json:"prev,omitempty"`
	Nodes []StoredNode `json:"nodes,omitempty"`
	Edges []StoredEdge `json:"edges,omitempty"`
	Graph *graph       `json:"graph,omitempty"`
	// Auth is the MAIN's user store (system replication).
	Auth *authData `json:"auth,omitempty"`
}

type replicaSpec struct {
	Name              string `json:"name"`
	ReplicationServer string `json:"replication_server"`
	Mode              string `json:"mode"`
}

// response answers a request; Error is set when it failed.
type response struct {
	Error     string       `json:"error,omitempty"`
	Role      string       `json:"role,omitempty"`
	Writable  bool         `json:"writable,omitempty"`
	Committed uint64       `json:"committed,omitempty"`
	Epoch     uint64       `json:"epoch,omitempty"`
	Snapshot  bool         `json:"need_snapshot,omitempty"`
	Rows      [][]any      `json:"rows,omitempty"`
	Lag       []replicaLag `json:"lag,omitempty"`
}

type replicaLag struct {
	Name      string `json:"name"`
	Committed uint64 `json:"committed"`
	Behind    uint64 `json:"behind"`
	// Invalid: the MAIN's last send or check of the replica failed (Memgraph's
	// MAYBE_BEHIND, "invalid" in SHOW REPLICAS).
	Invalid bool `json:"invalid,omitempty"`
}

// call sends one request to addr (from the local address from, nil for any) and decodes the response; a response carrying Error
// comes back as an error.
func call(ctx context.Context, addr string, from net.Addr, req request, timeout time.Duration) (response, error) {
	var resp response
	d := net.Dialer{Timeout: timeout, LocalAddr: from}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return resp, err
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return resp, err
	}
	dec := json.NewDecoder(bufio.NewReader(conn))
	dec.UseNumber()
	if err := dec.Decode(&resp); err != nil {
		return resp, fmt.Errorf("%s %s: %w", req.Op, addr, err)
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// rpcServer serves requests on a listener with handle until closed.
type rpcServer struct {
	ln     net.Listener
	handle func(request) response
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func serveRPC(ln net.Listener, handle func(request) response) *rpcServer {
	s := &rpcServer{ln: ln, handle: handle, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *rpcServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

func (s *rpcServer) serve(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
	}()
	dec := json.NewDecoder(bufio.NewReader(conn))
	dec.UseNumber()
	enc := json.NewEncoder(conn)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		if err := enc.Encode(s.handle(req)); err != nil {
			return
		}
	}
}

// Close stops accepting, drops open connections and waits for handlers to return.
func (s *rpcServer) Close() {
	s.mu.Lock()
	s.closed = true
	_ = s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func errResponse(err error) response { return response{Error: err.Error()} }

package memgraphsim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// This file holds the coordinators' queries: the leader's mutations, the SHOW commands
// and the routing table; coordinator.go holds Raft, health checks and failover.

// Memgraph's error texts for coordinator queries.
const (
	ErrMainExists           = "Couldn't set instance to main since there is already a main instance in cluster!"
	ErrNoSuchInstance       = "No instance with such name!"
	ErrUnregisterAliveMain  = "Alive main instance can't be unregistered! Shut it down to trigger failover and then unregister it!"
	ErrDuplicateInstance    = "Couldn't register replica instance since instance with such name already exists!"
	ErrDuplicateCoordinator = "Couldn't add coordinator since instance with such id already exists!"
	ErrRaftWrite            = "Writing to Raft log failed. Please retry the operation."
	ErrCoordinatorOnly      = "Coordinator can run only coordinator queries!"
	ErrNoStorage            = "Coordinators don't have storage!"
	ErrCoordinatorInTx      = "Managing coordinators is not allowed in multicommand transactions"
	ErrForwardFailed        = "Request forwarded to the leader but leader failed with request processing!"
	ErrStrictSyncAndSync    = "Cluster cannot consists of both STRICT_SYNC and SYNC replicas. The valid cluster consists of either STRICT_SYNC and ASYNC or SYNC and ASYNC replicas."
	ErrRegisterDemoteFailed = "Couldn't register replica instance because setting instance to replica failed! Check logs on replica to find out more info!"
)

func errRemoveLeader(id int) string {
	return fmt.Sprintf("Request for removing coordinator %d failed because the current leader cannot be removed!", id)
}

func errAlreadyReplica(name string) string {
	return fmt.Sprintf("Instance %s is already a replica!", name)
}

func (c *coordinator) handleManagement(req request) response {
	switch req.Op {
	case "health":
		role := RoleFollower
		if c.isLeader() {
			role = RoleLeader
		}
		return response{Role: role}
	case "exec":
		if !c.ready() {
			return response{Error: "not the leader"}
		}
		cmd, err := ParseQuery(req.Query, nil)
		if err != nil {
			return errResponse(err)
		}
		rows, err := c.leaderExec(cmd)
		if err != nil {
			return errResponse(err)
		}
		return response{Rows: rows}
	case "show-instances":
		if !c.ready() {
			return response{Error: "not the leader"}
		}
		return response{Rows: c.showInstancesAsLeader()}
	}
	return response{Error: "unknown management operation " + req.Op}
}

// exec runs a coordinator query on this coordinator: mutations and SHOW REPLICATION LAG on
// the leader (forwarded there by a follower), SHOW INSTANCES from the leader when
// reachable, else from local state.
func (c *coordinator) exec(cmd Command, text string) ([][]any, error) {
	switch cmd.Kind {
	case KindShowInstance:
		return [][]any{c.showInstance()}, nil
	case KindShowCoordinatorSettings:
		// Memgraph 3.12 answers from the coordinator's own Raft state.
		return c.settingsRows(), nil
	case KindShowInstances:
		if c.waitReady() {
			return c.showInstancesAsLeader(), nil
		}
		if meta, ok := c.leaderMeta(); ok && meta.ManagementServer != "" {
			resp, err := c.opts.call(context.Background(), meta.ManagementServer, request{Op: "show-instances"}, 2*time.Second)
			if err == nil {
				return fixRows(resp.Rows), nil
			}
		}
		return c.showInstancesAsFollower(), nil
	}
	if c.waitReady() {
		return c.leaderExec(cmd)
	}
	meta, ok := c.leaderMeta()
	if !ok || meta.ManagementServer == "" {
		return nil, failure("Couldn't run %s since coordinator %d is not a leader and knows no leader to forward it to!", cmd.Verb(), c.id)
	}
	resp, err := c.opts.call(context.Background(), meta.ManagementServer, request{Op: "exec", Query: text}, 30*time.Second)
	if err != nil {
		c.log.Info("Forwarded request failed", "query", cmd.Verb(), "error", err)
		return nil, failure(ErrForwardFailed)
	}
	return fixRows(resp.Rows), nil
}

// fixRows restores integer types after JSON decoding (json.Number).
func fixRows(rows [][]any) [][]any {
	for _, r := range rows {
		for i := range r {
			r[i] = fromJSONValue(r[i])
		}
	}
	return rows
}

// leaderMeta is the current leader's recorded addresses.
func (c *coordinator) leaderMeta() (coordMeta, bool) {
	_, id := c.raft.LeaderWithID()
	if id == "" || string(id) == strconv.Itoa(c.id) {
		return coordMeta{}, false
	}
	meta, ok := c.fsm.state().Coordinators[string(id)]
	return meta, ok
}

// leaderExec runs a coordinator query as the leader.
func (c *coordinator) leaderExec(cmd Command) ([][]any, error) {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if !c.ready() {
		return nil, failure("Coordinator %d lost leadership; retry the operation.", c.id)
	}
	st := c.fsm.state()
	switch cmd.Kind {
	case KindAddCoordinator:
		return nil, c.addCoordinator(st, cmd)
	case KindRemoveCoordinator:
		return nil, c.removeCoordinator(cmd.ID)
	case KindRegisterInstance:
		return nil, c.register(st, cmd)
	case KindUnregisterInstance:
		if _, ok := st.instance(cmd.Name); !ok {
			return nil, failure(ErrNoSuchInstance)
		}
		if _, up := c.alive(cmd.Name); up && st.Main == cmd.Name {
			return nil, failure(ErrUnregisterAliveMain)
		}
		if err := c.apply(fsmCommand{Op: "unregister", Name: cmd.Name}); err != nil {
			return nil, err
		}
		c.hmu.Lock()
		delete(c.health, cmd.Name)
		c.hmu.Unlock()
		c.reconcileLocked()
		return nil, nil
	case KindSetMain:
		return nil, c.setMain(st, cmd.Name)
	case KindDemote:
		inst, ok := st.instance(cmd.Name)
		if !ok {
			return nil, failure(ErrNoSuchInstance)
		}
		if st.Main != cmd.Name {
			return nil, failure("%s", errAlreadyReplica(cmd.Name))
		}
		req := request{Op: "demote", Name: inst.Name, Epoch: st.Epoch, ReplicationServer: inst.ReplicationServer}
		if _, err := c.opts.call(context.Background(), inst.ManagementServer, req, c.opts.ReplicationTimeout); err != nil {
			return nil, failure("Instance %s failed to demote to replica.", cmd.Name)
		}
		return nil, c.apply(fsmCommand{Op: "demote", Name: cmd.Name})
	case KindUpdateConfig:
		return nil, c.updateBoltServer(st, cmd)
	case KindSetCoordinatorSetting:
		return nil, c.setSetting(cmd)
	case KindYieldLeadership:
		if err := c.raft.LeadershipTransfer().Error(); err != nil {
			return nil, failure("Couldn't yield leadership: %s", err.Error())
		}
		return nil, nil
	case KindShowReplicationLag:
		return c.replicationLag(st)
	}
	return nil, failure("%s", ErrCoordinatorOnly)
}

func checkConfigKeys(cfg map[string]string, keys ...string) error {
	if len(cfg) != len(keys) {
		return fmt.Errorf("config must hold exactly %s", strings.Join(keys, ", "))
	}
	for _, k := range keys {
		if cfg[k] == "" {
			return fmt.Errorf("config must hold exactly %s", strings.Join(keys, ", "))
		}
	}
	return nil
}

func (c *coordinator) raftServers() ([]raft.Server, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

func (c *coordinator) addCoordinator(st clusterState, cmd Command) error {
	if err := checkConfigKeys(cmd.Config, "bolt_server", "coordinator_server", "management_server"); err != nil {
		return failure("%s", err.Error())
	}
	id := strconv.Itoa(cmd.ID)
	meta := coordMeta{BoltServer: cmd.Config["bolt_server"], CoordinatorServer: cmd.Config["coordinator_server"], ManagementServer: cmd.Config["management_server"]}
	servers, err := c.raftServers()
	if err != nil {
		return failure(ErrRaftWrite)
	}
	member := false
	for _, s := range servers {
		if string(s.ID) == id {
			member = true
		}
	}
	if _, ok := st.Coordinators[id]; ok && member {
		return failure(ErrDuplicateCoordinator)
	}
	for other, m := range st.Coordinators {
		if other != id && (m.BoltServer == meta.BoltServer || m.CoordinatorServer == meta.CoordinatorServer) {
			return failure("Couldn't add coordinator since instance with such bolt or coordinator server already exists!")
		}
	}
	if !member {
		// hashicorp/raft adds a voter at once, so an unreachable one would cost the
		// cluster its quorum until it appears: refuse it up front.
		conn, err := c.opts.dial(context.Background(), meta.CoordinatorServer, 2*time.Second)
		if err != nil {
			return failure("Couldn't add coordinator %d since its coordinator server %s is unreachable!", cmd.ID, meta.CoordinatorServer)
		}
		_ = conn.Close()
		if err := c.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(meta.CoordinatorServer), 0, 10*time.Second).Error(); err != nil {
			c.log.Warn("AddVoter failed", "id", id, "error", err)
			return failure(ErrRaftWrite)
		}
	}
	return c.apply(fsmCommand{Op: "coord_meta", ID: cmd.ID, Coord: meta})
}

// updateBoltServer is UPDATE CONFIG FOR INSTANCE|COORDINATOR: only bolt_server, the
// address routing tables carry, changes on a registered member; the others would move
// health checks, replication or Raft under a running cluster. (The simulator's wording of
// its refusals.)
func (c *coordinator) updateBoltServer(st clusterState, cmd Command) error {
	if err := checkConfigKeys(cmd.Config, "bolt_server"); err != nil {
		return failure("Only bolt_server can be updated: %s", err.Error())
	}
	bolt := cmd.Config["bolt_server"]
	if cmd.Name != "" {
		inst, ok := st.instance(cmd.Name)
		if !ok {
			return failure(ErrNoSuchInstance)
		}
		inst.BoltServer = bolt
		return c.apply(fsmCommand{Op: "register_update", Instance: inst})
	}
	meta, ok := st.Coordinators[strconv.Itoa(cmd.ID)]
	if !ok {
		return failure("Couldn't update coordinator %d since no coordinator with such id exists!", cmd.ID)
	}
	meta.BoltServer = bolt
	return c.apply(fsmCommand{Op: "coord_meta", ID: cmd.ID, Coord: meta})
}

func (c *coordinator) removeCoordinator(id int) error {
	if id == c.id {
		return failure("%s", errRemoveLeader(id))
	}
	servers, err := c.raftServers()
	if err != nil {
		return failure(ErrRaftWrite)
	}
	found := false
	for _, s := range servers {
		found = found || string(s.ID) == strconv.Itoa(id)
	}
	if !found {
		return failure("Couldn't remove coordinator %d since no coordinator with such id exists!", id)
	}
	if err := c.raft.RemoveServer(raft.ServerID(strconv.Itoa(id)), 0, 10*time.Second).Error(); err != nil {
		c.log.Warn("RemoveServer failed", "id", id, "error", err)
		return failure(ErrRaftWrite)
	}
	return c.apply(fsmCommand{Op: "coord_remove", ID: id})
}

func (c *coordinator) register(st clusterState, cmd Command) error {
	if err := checkConfigKeys(cmd.Config, "bolt_server", "management_server", "replication_server"); err != nil {
		return failure("%s", err.Error())
	}
	inst := dataMeta{Name: cmd.Name, BoltServer: cmd.Config["bolt_server"], ManagementServer: cmd.Config["management_server"],
		ReplicationServer: cmd.Config["replication_server"], Mode: cmd.Mode}
	if _, ok := st.instance(cmd.Name); ok {
		return failure(ErrDuplicateInstance)
	}
	for _, other := range st.Instances {
		switch {
		case other.BoltServer == inst.BoltServer:
			return failure("Couldn't register replica instance since instance with such bolt server already exists!")
		case other.ManagementServer == inst.ManagementServer:
			return failure("Couldn't register replica instance since instance with such management server already exists!")
		case other.ReplicationServer == inst.ReplicationServer:
			return failure("Couldn't register replica instance since instance with such replication server already exists!")
		case (other.Mode == "sync" && inst.Mode == "strict_sync") || (other.Mode == "strict_sync" && inst.Mode == "sync"):
			return failure(ErrStrictSyncAndSync)
		}
	}
	req := request{Op: "demote", Name: inst.Name, Epoch: st.Epoch, ReplicationServer: inst.ReplicationServer}
	resp, err := c.opts.call(context.Background(), inst.ManagementServer, req, c.opts.ReplicationTimeout)
	if err != nil {
		c.log.Warn("Register: demote failed", "instance", inst.Name, "error", err)
		return failure(ErrRegisterDemoteFailed)
	}
	if err := c.apply(fsmCommand{Op: "register", Instance: inst}); err != nil {
		return err
	}
	c.hmu.Lock()
	c.health[inst.Name] = &instHealth{lastOK: time.Now(), role: RoleReplica, epoch: resp.Epoch, committed: resp.Committed}
	c.hmu.Unlock()
	c.reconcileLocked()
	return nil
}

func (c *coordinator) setMain(st clusterState, name string) error {
	inst, ok := st.instance(name)
	if !ok {
		return failure(ErrNoSuchInstance)
	}
	if st.Main != "" {
		return failure(ErrMainExists)
	}
	if _, up := c.alive(name); !up {
		return failure("Couldn't set instance %s to main since it is down!", name)
	}
	epoch := st.Epoch + 1
	// Raft first: a promotion Raft does not know about could never be undone by failover.
	if err := c.apply(fsmCommand{Op: "set_main", Name: name, Epoch: epoch}); err != nil {
		return err
	}
	if err := c.promote(inst, epoch, replicaSpecs(c.fsm.state(), name)); err != nil {
		return failure("Instance %s is recorded as main but did not confirm its promotion yet; the coordinators keep retrying.", name)
	}
	c.reconcileLocked()
	return nil
}

func (c *coordinator) replicationLag(st clusterState) ([][]any, error) {
	inst, ok := st.instance(st.Main)
	if !ok {
		return nil, failure("Can't show replication lag since there is no main instance in the cluster!")
	}
	resp, err := c.opts.call(context.Background(), inst.ManagementServer, request{Op: "lag"}, c.checkTimeout())
	if err != nil {
		return nil, failure("Can't show replication lag since the main instance %s did not answer!", inst.Name)
	}
	info := func(committed, behind uint64) map[string]any {
		return map[string]any{"memgraph": map[string]any{"num_committed_txns": int64(committed), "num_txns_behind_main": int64(behind)}}
	}
	rows := [][]any{{inst.Name, info(resp.Committed, 0)}}
	for _, l := range resp.Lag {
		rows = append(rows, []any{l.Name, info(l.Committed, l.Behind)})
	}
	return rows, nil
}

// ShowInstances column order.
var showInstancesFields = []string{"name", "bolt_server", "coordinator_server", "management_server", "health", "role", "last_succ_resp_ms"}

// coordinatorRows lists the Raft members ordered by id; health is known only to a ready
// leader.
func (c *coordinator) coordinatorRows(st clusterState, asLeader bool) [][]any {
	servers, _ := c.raftServers()
	_, leaderID := c.raft.LeaderWithID()
	now := time.Now()
	sort.Slice(servers, func(i, j int) bool {
		a, _ := strconv.Atoi(string(servers[i].ID))
		b, _ := strconv.Atoi(string(servers[j].ID))
		return a < b
	})
	if len(servers) == 0 {
		// Not part of a cluster yet: only its own row, as a follower.
		servers = []raft.Server{{ID: raft.ServerID(strconv.Itoa(c.id)), Address: raft.ServerAddress(c.opts.CoordinatorServer())}}
	}
	var rows [][]any
	for _, s := range servers {
		meta := st.Coordinators[string(s.ID)]
		if meta.CoordinatorServer == "" {
			meta.CoordinatorServer = string(s.Address)
		}
		role := RoleFollower
		if s.ID == leaderID {
			role = RoleLeader
		}
		health, last := "unknown", int64(0)
		if asLeader {
			if string(s.ID) == strconv.Itoa(c.id) {
				health = "up"
			} else {
				c.hmu.Lock()
				ok, seen := c.coordOK[string(s.ID)]
				c.hmu.Unlock()
				health = "down"
				if seen {
					last = now.Sub(ok).Milliseconds()
					if now.Sub(ok) < c.downTimeout() {
						health = "up"
					}
				}
			}
		}
		rows = append(rows, []any{"coordinator_" + string(s.ID), meta.BoltServer, meta.CoordinatorServer, meta.ManagementServer, health, role, last})
	}
	return rows
}

func (c *coordinator) showInstancesAsLeader() [][]any {
	st := c.fsm.state()
	rows := c.coordinatorRows(st, true)
	now := time.Now()
	for _, inst := range st.Instances {
		h, up := c.alive(inst.Name)
		health, role := "down", "unknown"
		if up {
			health, role = "up", RoleReplica
			if st.Main == inst.Name {
				role = RoleMain
			}
		}
		rows = append(rows, []any{inst.Name, inst.BoltServer, "", inst.ManagementServer, health, role, now.Sub(h.lastOK).Milliseconds()})
	}
	return rows
}

func (c *coordinator) showInstancesAsFollower() [][]any {
	st := c.fsm.state()
	rows := c.coordinatorRows(st, false)
	for _, inst := range st.Instances {
		role := RoleReplica
		if st.Main == inst.Name {
			role = RoleMain
		}
		rows = append(rows, []any{inst.Name, inst.BoltServer, "", inst.ManagementServer, "unknown", role, int64(0)})
	}
	return rows
}

func (c *coordinator) showInstance() []any {
	meta := c.fsm.state().Coordinators[strconv.Itoa(c.id)]
	mgmt := meta.ManagementServer
	if mgmt == "" && c.opts.ManagementPort > 0 {
		mgmt = c.opts.Addr(c.opts.ManagementPort)
	}
	role := RoleFollower
	if c.isLeader() {
		role = RoleLeader
	}
	return []any{c.name(), meta.BoltServer, c.opts.CoordinatorServer(), mgmt, role}
}

// routingTable answers ROUTE: routers are the coordinators, the writer the MAIN, the
// readers the replicas (only alive ones when this coordinator is the ready leader).
func (c *coordinator) routingTable() (routers, writers, readers []string) {
	st := c.fsm.state()
	ids := make([]int, 0, len(st.Coordinators))
	for id := range st.Coordinators {
		n, _ := strconv.Atoi(id)
		ids = append(ids, n)
	}
	sort.Ints(ids)
	for _, id := range ids {
		if b := st.Coordinators[strconv.Itoa(id)].BoltServer; b != "" {
			routers = append(routers, b)
		}
	}
	leader := c.ready()
	for _, inst := range st.Instances {
		if leader {
			if _, up := c.alive(inst.Name); !up {
				continue
			}
		}
		if inst.Name == st.Main {
			writers = append(writers, inst.BoltServer)
		} else {
			readers = append(readers, inst.BoltServer)
		}
	}
	return routers, writers, readers
}

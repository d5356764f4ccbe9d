package memgraphsim

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/hashicorp/raft"
)

// coordMeta is what ADD COORDINATOR records about a coordinator beyond its Raft address.
type coordMeta struct {
	BoltServer        string `json:"bolt_server"`
	CoordinatorServer string `json:"coordinator_server"`
	ManagementServer  string `json:"management_server"`
}

// dataMeta is a registered data instance.
type dataMeta struct {
	Name              string `json:"name"`
	BoltServer        string `json:"bolt_server"`
	ManagementServer  string `json:"management_server"`
	ReplicationServer string `json:"replication_server"`
	Mode              string `json:"mode"`
}

// clusterState is the coordinators' replicated state: what Memgraph keeps in its Raft
// state machine.
type clusterState struct {
	Coordinators map[string]coordMeta `json:"coordinators"` // by id
	Instances    []dataMeta           `json:"instances"`    // in registration order
	Main         string               `json:"main"`
	// Epoch is raised by every promotion (Memgraph's main UUID).
	Epoch uint64 `json:"epoch"`
	// Settings are the coordinator settings SET COORDINATOR SETTING changed; one never
	// set has its default (settingDefaults).
	Settings map[string]string `json:"settings,omitempty"`
}

func (s clusterState) instance(name string) (dataMeta, bool) {
	for _, i := range s.Instances {
		if i.Name == name {
			return i, true
		}
	}
	return dataMeta{}, false
}

func (s clusterState) clone() clusterState {
	c := s
	c.Coordinators = make(map[string]coordMeta, len(s.Coordinators))
	for k, v := range s.Coordinators {
		c.Coordinators[k] = v
	}
	c.Instances = slices.Clone(s.Instances)
	if s.Settings != nil {
		c.Settings = make(map[string]string, len(s.Settings))
		for k, v := range s.Settings {
			c.Settings[k] = v
		}
	}
	return c
}

// fsmCommand is one Raft log entry.
type fsmCommand struct {
	Op       string    `json:"op"` // coord_meta, coord_remove, register, register_update, unregister, set_main, demote, setting
	ID       int       `json:"id,omitempty"`
	Coord    coordMeta `json:"coord,omitzero"`
	Instance dataMeta  `json:"instance,omitzero"`
	Name     string    `json:"name,omitempty"`
	Epoch    uint64    `json:"epoch,omitempty"`
	Value    string    `json:"value,omitempty"`
}

// fsm applies commands; validation happens on the leader before a command is proposed, so
// Apply itself never refuses one.
type fsm struct {
	mu sync.RWMutex
	st clusterState
}

func newFSM() *fsm { return &fsm{st: clusterState{Coordinators: map[string]coordMeta{}}} }

func (f *fsm) state() clusterState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.clone()
}

func (f *fsm) Apply(l *raft.Log) any {
	var c fsmCommand
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("decode raft command: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	applyCommand(&f.st, c)
	return nil
}

// applyCommand is the state transition of one command.
func applyCommand(s *clusterState, c fsmCommand) {
	switch c.Op {
	case "coord_meta":
		s.Coordinators[strconv.Itoa(c.ID)] = c.Coord
	case "coord_remove":
		delete(s.Coordinators, strconv.Itoa(c.ID))
	case "register":
		if _, ok := s.instance(c.Instance.Name); !ok {
			s.Instances = append(s.Instances, c.Instance)
		}
	case "register_update":
		for i := range s.Instances {
			if s.Instances[i].Name == c.Instance.Name {
				s.Instances[i] = c.Instance
			}
		}
	case "unregister":
		s.Instances = slices.DeleteFunc(s.Instances, func(i dataMeta) bool { return i.Name == c.Name })
		if s.Main == c.Name {
			s.Main = ""
		}
	case "set_main":
		s.Main, s.Epoch = c.Name, max(s.Epoch, c.Epoch)
	case "demote":
		if s.Main == c.Name {
			s.Main = ""
		}
	case "setting":
		if s.Settings == nil {
			s.Settings = map[string]string{}
		}
		s.Settings[c.Name] = c.Value
	}
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	b, err := json.Marshal(f.state())
	if err != nil {
		return nil, err
	}
	return fsmSnapshot(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	st := clusterState{Coordinators: map[string]coordMeta{}}
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return err
	}
	if st.Coordinators == nil {
		st.Coordinators = map[string]coordMeta{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	return nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

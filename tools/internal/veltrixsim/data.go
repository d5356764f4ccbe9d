package veltrixsim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errNotFound is GET's answer for a missing or deleted key.
var errNotFound = errors.New("not found")

// write stores e for key on every owner of its partition. One acknowledgement is enough;
// an owner that did not answer gets the write later from this node's hints.
func (n *Node) write(key string, e Entry) error {
	v := n.snapshot()
	owners := v.Owners(Partition(key, v.PartitionCount))
	if len(owners) == 0 {
		return errors.New("no members own partitions yet")
	}
	acks := 0
	var errs []error
	for _, id := range owners {
		if err := n.replicate(v, id, key, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			n.addHint(id, key, e)
			continue
		}
		acks++
	}
	if acks == 0 {
		return fmt.Errorf("no owner of partition %d answered: %w", Partition(key, v.PartitionCount), errors.Join(errs...))
	}
	return nil
}

// replicate sends e to member id (or applies it here).
func (n *Node) replicate(v View, id, key string, e Entry) error {
	if id == n.cfg.NodeID {
		return n.applyLocal(key, e)
	}
	m, ok := v.Member(id)
	if !ok {
		return fmt.Errorf("member %s is not in epoch %d", id, v.Epoch)
	}
	// The version carries the sender's epoch (ver:epoch): a receiver that does not own the
	// key in an older view it still holds must not take it, or its mover would hand it
	// back and drop it while the sender counts it as placed.
	line := fmt.Sprintf("_PUT %d:%d %s %s", e.Ver, v.Epoch, key, e.Val)
	if e.Del {
		line = fmt.Sprintf("_DEL %d:%d %s", e.Ver, v.Epoch, key)
	}
	ans, err := n.peers.Do(m.Addr, line)
	if err != nil {
		return err
	}
	if ans != "OK" {
		return errors.New(ans)
	}
	return nil
}

// applyLocal stores a replica; one for a partition this node does not own wakes the mover,
// which hands it on.
func (n *Node) applyLocal(key string, e Entry) error {
	st := n.store.Load()
	if st == nil {
		return errors.New("loading")
	}
	stored, err := st.Apply(key, e)
	if err != nil || !stored {
		return err
	}
	v := n.snapshot()
	if !containsID(v.Owners(Partition(key, v.PartitionCount)), n.cfg.NodeID) {
		n.mu.Lock()
		n.moveDirty = true
		n.mu.Unlock()
		n.kick()
	}
	return nil
}

// read finds key on its owners; when none of them has it (a partition still moving) it
// asks every other member, so a key is found until it has been moved.
func (n *Node) read(key string) (string, error) {
	v := n.snapshot()
	owners := v.Owners(Partition(key, v.PartitionCount))
	best, found, failed := n.readFrom(v, key, owners)
	if !found {
		var others []string
		for _, m := range v.Members {
			if !containsID(owners, m.ID) {
				others = append(others, m.ID)
			}
		}
		if _, in := v.Member(n.cfg.NodeID); !in {
			others = append(others, n.cfg.NodeID)
		}
		var f2 int
		best, found, f2 = n.readFrom(v, key, others)
		failed += f2
	}
	switch {
	case found && !best.Del:
		return best.Val, nil
	case !found && failed > 0:
		return "", fmt.Errorf("unavailable: %d members did not answer", failed)
	default:
		return "", errNotFound
	}
}

func (n *Node) readFrom(v View, key string, ids []string) (Entry, bool, int) {
	var best Entry
	found, failed := false, 0
	for _, id := range ids {
		e, ok, err := n.readOne(v, id, key)
		if err != nil {
			failed++
			continue
		}
		if ok && (!found || e.Ver > best.Ver) {
			best, found = e, true
		}
	}
	return best, found, failed
}

func (n *Node) readOne(v View, id, key string) (Entry, bool, error) {
	if id == n.cfg.NodeID {
		st := n.store.Load()
		if st == nil {
			return Entry{}, false, errors.New("loading")
		}
		e, ok := st.Get(key)
		return e, ok, nil
	}
	m, ok := v.Member(id)
	if !ok {
		return Entry{}, false, fmt.Errorf("member %s unknown", id)
	}
	ans, err := n.peers.Do(m.Addr, "_GET "+key)
	if err != nil {
		return Entry{}, false, err
	}
	return parseGetAnswer(ans)
}

// parseGetAnswer reads "VAL <ver> <value>", "TOMB <ver>" or "NONE".
func parseGetAnswer(ans string) (Entry, bool, error) {
	verb, rest, _ := strings.Cut(ans, " ")
	switch verb {
	case "NONE":
		return Entry{}, false, nil
	case "VAL", "TOMB":
		verS, val, _ := strings.Cut(rest, " ")
		ver, err := strconv.ParseInt(verS, 10, 64)
		if err != nil {
			return Entry{}, false, fmt.Errorf("bad answer %q", ans)
		}
		return Entry{Val: val, Ver: ver, Del: verb == "TOMB"}, true, nil
	}
	return Entry{}, false, fmt.Errorf("bad answer %q", ans)
}

func formatGetAnswer(e Entry, ok bool) string {
	switch {
	case !ok:
		return "NONE"
	case e.Del:
		return fmt.Sprintf("TOMB %d", e.Ver)
	default:
		return fmt.Sprintf("VAL %d %s", e.Ver, e.Val)
	}
}

const maxHintsPerMember = 100000

func (n *Node) addHint(id, key string, e Entry) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.hints[id]
	if h == nil {
		h = map[string]Entry{}
		n.hints[id] = h
	}
	if len(h) >= maxHintsPerMember {
		return
	}
	if old, ok := h[key]; !ok || old.Ver < e.Ver {
		h[key] = e
	}
}

// retryHints resends writes an owner missed; hints live in memory only.
func (n *Node) retryHints() {
	n.mu.Lock()
	if len(n.hints) == 0 {
		n.mu.Unlock()
		return
	}
	todo := n.hints
	n.hints = map[string]map[string]Entry{}
	n.mu.Unlock()
	v := n.snapshot()
	for id, h := range todo {
		if _, ok := v.Member(id); !ok {
			continue // gone: its partitions have other owners now
		}
		for key, e := range h {
			if err := n.replicate(v, id, key, e); err != nil {
				n.addHint(id, key, e)
			}
		}
	}
}

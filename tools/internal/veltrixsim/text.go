package veltrixsim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
)

const maxLine = 1 << 20

var knownVerbs = map[string]bool{"PING": true, "INFO": true, "PUT": true, "GET": true, "DEL": true, "TOPOLOGY": true,
	"SEARCH": true, "_PUT": true, "_DEL": true, "_GET": true, "_MEMBERS": true, "_OP": true}

type textServer struct {
	n  *Node
	ln net.Listener
	mu sync.Mutex
	cs map[net.Conn]bool
	wg sync.WaitGroup
}

func newTextServer(n *Node, ln net.Listener) *textServer {
	return &textServer{n: n, ln: ln, cs: map[net.Conn]bool{}}
}

func (s *textServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.cs == nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.cs[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.conn(c)
	}
}

func (s *textServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.cs {
		c.Close()
	}
	s.cs = nil
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *textServer) conn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.cs, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriter(c)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		ans := s.n.Handle(strings.TrimRight(sc.Text(), "\r"))
		if _, err := w.WriteString(ans + "\n"); err != nil {
			return
		}
		// Pipelined commands are answered in one write.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
	_ = w.Flush()
}

// Handle answers one command line with one answer line.
func (n *Node) Handle(line string) string {
	verb, rest, _ := strings.Cut(strings.TrimLeft(line, " "), " ")
	verb = strings.ToUpper(verb)
	if knownVerbs[verb] {
		n.count(verb)
	} else {
		n.count("unknown")
	}
	switch verb {
	case "PING":
		return "PONG"
	case "INFO":
		return n.info()
	case "":
		return "ERR empty command"
	}
	if !n.opened() {
		return "ERR loading: the engine is opening its data"
	}
	switch verb {
	case "PUT":
		key, val, ok := strings.Cut(rest, " ")
		if !ok || key == "" || val == "" {
			return "ERR usage: PUT <key> <value>"
		}
		if err := n.write(key, Entry{Val: val, Ver: n.nextVersion()}); err != nil {
			return "ERR " + err.Error()
		}
		return "OK"
	case "GET":
		key := strings.TrimSpace(rest)
		if key == "" || strings.Contains(key, " ") {
			return "ERR usage: GET <key>"
		}
		val, err := n.read(key)
		if err != nil {
			return "ERR " + err.Error()
		}
		return val
	case "DEL":
		key := strings.TrimSpace(rest)
		if key == "" || strings.Contains(key, " ") {
			return "ERR usage: DEL <key>"
		}
		if err := n.write(key, Entry{Ver: n.nextVersion(), Del: true}); err != nil {
			return "ERR " + err.Error()
		}
		return "OK"
	case "TOPOLOGY":
		return mustJSON(n.topology())
	case "SEARCH":
		if !n.isSearchReady() {
			return "ERR search index not ready (search_ready=0)"
		}
		return n.search(strings.TrimSpace(rest))
	// Internal verbs between members.
	case "_PUT", "_DEL":
		verS, kv, _ := strings.Cut(rest, " ")
		verS, epochS, _ := strings.Cut(verS, ":")
		ver, err := strconv.ParseInt(verS, 10, 64)
		if err != nil {
			return "ERR bad version"
		}
		e := Entry{Ver: ver, Del: verb == "_DEL"}
		key := kv
		if !e.Del {
			key, e.Val, _ = strings.Cut(kv, " ")
		}
		if epoch, err := strconv.ParseInt(epochS, 10, 64); err == nil {
			v := n.snapshot()
			if epoch > v.Epoch && !containsID(v.Owners(Partition(key, v.PartitionCount)), n.cfg.NodeID) {
				return fmt.Sprintf("ERR view behind: epoch %d, sender's %d", v.Epoch, epoch)
			}
		}
		if err := n.applyLocal(key, e); err != nil {
			return "ERR " + err.Error()
		}
		return "OK"
	case "_GET":
		e, ok := n.store.Load().Get(strings.TrimSpace(rest))
		return formatGetAnswer(e, ok)
	case "_MEMBERS":
		var v View
		if err := json.Unmarshal([]byte(rest), &v); err != nil {
			return "ERR bad view: " + err.Error()
		}
		n.adopt(v)
		return n.gossipAnswer()
	case "_OP":
		f := strings.Fields(rest)
		if len(f) < 2 {
			return "ERR 400 usage: _OP <hops> <kind> <args...>"
		}
		hops, err := strconv.Atoi(f[0])
		if err != nil {
			return "ERR 400 bad hops"
		}
		return formatOpAnswer(n.memberOp(hops, f[1], f[2:]...))
	}
	return fmt.Sprintf("ERR unknown command %q", verb)
}

// search answers SEARCH <prefix>: the keys this node holds that start with prefix, as one
// JSON array (at most 1000).
func (n *Node) search(prefix string) string {
	var keys []string
	for _, ke := range n.store.Load().Entries() {
		if !ke.Del && strings.HasPrefix(ke.Key, prefix) {
			keys = append(keys, ke.Key)
			if len(keys) == 1000 {
				break
			}
		}
	}
	sort.Strings(keys)
	if keys == nil {
		keys = []string{}
	}
	return mustJSON(keys)
}

// InfoFields returns INFO's fields.
func (n *Node) InfoFields() map[string]string {
	v := n.snapshot()
	f := map[string]string{
		"node_id":            n.cfg.NodeID,
		"mode":               n.cfg.Mode,
		"version":            "sim",
		"net":                n.cfg.Net,
		"index":              n.cfg.Index,
		"loading":            "1",
		"keys":               "0",
		"search_ready":       "0",
		"members":            strconv.Itoa(len(v.Members)),
		"epoch":              strconv.FormatInt(v.Epoch, 10),
		"partition_count":    strconv.Itoa(v.PartitionCount),
		"replication_factor": strconv.Itoa(v.ReplicationFactor),
		"state":              n.selfState(v),
		"keys_moved":         strconv.FormatInt(n.keysMoved.Load(), 10),
		"data_dirs":          strconv.Itoa(len(n.cfg.DataDirs)),
		"uring_bridge":       n.uringBridge,
	}
	f["raw_vlogs"], f["raw_vlog_checkpoints"] = rawVLogInfo(n.openRawVLogs())
	active := 0
	for _, m := range v.Members {
		if m.State == StateActive {
			active++
		}
	}
	f["active_members"] = strconv.Itoa(active)
	n.mu.Lock()
	f["moves_pending"] = strconv.Itoa(n.movesPending)
	f["move_epoch"] = strconv.FormatInt(n.moveEpoch, 10)
	n.mu.Unlock()
	if st := n.store.Load(); st != nil && n.opened() {
		live, _ := st.Len()
		f["keys"] = strconv.Itoa(live)
		f["loading"] = "0"
	}
	if n.isSearchReady() {
		f["search_ready"] = "1"
	}
	return f
}

var infoOrder = []string{"node_id", "mode", "version", "keys", "search_ready", "members", "active_members", "epoch", "state"}

func (n *Node) info() string {
	f := n.InfoFields()
	var parts []string
	for _, k := range infoOrder {
		parts = append(parts, k+"="+f[k])
		delete(f, k)
	}
	rest := make([]string, 0, len(f))
	for k := range f {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, k+"="+f[k])
	}
	return strings.Join(parts, " ")
}

// ParseInfo parses an INFO line into its fields.
func ParseInfo(line string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Fields(line) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, errors.New("INFO field without '=': " + kv)
		}
		out[k] = v
	}
	return out, nil
}

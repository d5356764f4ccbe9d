// Package veltrixsim simulates a VeltrixDB server for tests and the local cluster: the
// public server's text protocol and admin HTTP, plus the online membership contract of
// the product document (join, leave, persisted membership, slow data movement).
package veltrixsim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// MinMaxMapCount is the vm.max_map_count the native (off-heap) index needs.
const MinMaxMapCount = 262144

// Modes of the server.
const (
	ModeStandalone = "standalone"
	ModeRaft       = "raft"
	ModeReplicated = "replicated"
)

// Index kinds: the native index is the default of the CGO image; "map" is the fallback
// selected by VELTRIXDB_INDEX=map.
const (
	IndexNative = "native"
	IndexMap    = "map"
)

// RefuseDelete values of the fault knob.
const (
	RefuseConflict = 409
	RefuseInternal = 500
)

// Peer is one --peers entry: a node id and its text-protocol address.
type Peer struct {
	ID   string
	Addr string
}

// Config is everything the server is started with: flags, environment and the simulator's
// own knobs.
type Config struct {
	Addr          string
	MetricsAddr   string
	NodeID        string
	Peers         []Peer
	Mode          string
	DataDirs      []string
	RawVLogs      []string
	AdminToken    string
	AuthConfig    string
	Net           string
	Join          []string
	AdvertiseAddr string
	// ReplicationFactor and PartitionCount seed a new cluster's membership; a persisted or
	// joined membership carries the cluster's own values.
	ReplicationFactor int
	PartitionCount    int
	Index             string
	CacheMaxSizeMB    int
	MaxMapCountFile   string
	// URingBridge is VELTRIXDB_URING_BRIDGE: off, on or sqpoll.
	URingBridge string
	// URingProbe says how the simulator learns whether io_uring_setup is allowed: probe
	// (call it), allowed or blocked (VELTRIX_SIM_URING, for tests).
	URingProbe string

	// Simulator knobs.
	MoveRate        float64       // keys per second moved on membership change; 0 pauses moves
	IndexRebuild    time.Duration // search_ready=0 for this long after reopening existing data
	OpenDelay       time.Duration // /readyz stays 503 this long while the data is "opened"
	RefuseDelete    int           // 0, 409 or 500: DELETE of a member answers with it
	CrashMidMove    int           // exit after this many keys moved in a pass (once per data dir)
	CheckpointEvery time.Duration // periodic checkpoint of a non-empty log
	GossipInterval  time.Duration // membership anti-entropy and hint retries
}

// env names.
const (
	EnvAdminToken        = "VELTRIX_ADMIN_TOKEN"
	EnvIndex             = "VELTRIXDB_INDEX"
	EnvReplicationFactor = "VELTRIXDB_REPLICATION_FACTOR"
	EnvCacheMaxSizeMB    = "VELTRIXDB_CACHE_MAX_SIZE_MB"
	EnvMoveRate          = "VELTRIX_SIM_MOVE_RATE"
	EnvIndexRebuild      = "VELTRIX_SIM_INDEX_REBUILD"
	EnvOpenDelay         = "VELTRIX_SIM_OPEN_DELAY"
	EnvRefuseDelete      = "VELTRIX_SIM_REFUSE_DELETE"
	EnvCrashMidMove      = "VELTRIX_SIM_CRASH_MID_MOVE"
	EnvMaxMapCountFile   = "VELTRIX_SIM_MAX_MAP_COUNT_FILE"
	EnvPartitionCount    = "VELTRIX_SIM_PARTITION_COUNT"
	EnvCheckpointEvery   = "VELTRIX_SIM_CHECKPOINT_INTERVAL"
	EnvURingBridge       = "VELTRIXDB_URING_BRIDGE"
	EnvSimURing          = "VELTRIX_SIM_URING"
)

// io_uring bridge values (VELTRIXDB_URING_BRIDGE) and INFO's uring_bridge, which is also
// "fallback" when the bridge is asked for and io_uring_setup is refused (seccomp
// RuntimeDefault): VLog writes then go through pwrite.
const (
	URingOff      = "off"
	URingOn       = "on"
	URingSQPoll   = "sqpoll"
	URingFallback = "fallback"
)

// VELTRIX_SIM_URING values.
const (
	URingProbeKernel  = "probe"
	URingProbeAllowed = "allowed"
	URingProbeBlocked = "blocked"
)

// ParseConfig reads flags (args without the program name) and the environment. Flags win
// over the environment. It validates syntax only; Check applies the server's refusals.
func ParseConfig(args []string, getenv func(string) string, output io.Writer) (Config, error) {
	fs := flag.NewFlagSet("veltrix-sim", flag.ContinueOnError)
	fs.SetOutput(output)
	var c Config
	var peers, seeds, dataDirs, rawVLogs, join, refuse string
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(getenv(name)); err == nil {
			return v
		}
		return def
	}
	envDur := func(name string, def time.Duration) time.Duration {
		if v, err := time.ParseDuration(getenv(name)); err == nil {
			return v
		}
		return def
	}
	envFloat := func(name string, def float64) float64 {
		if v, err := strconv.ParseFloat(getenv(name), 64); err == nil {
			return v
		}
		return def
	}
	envStr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.Addr, "addr", ":9000", "text protocol listen address")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":2112", "HTTP listen address (/healthz, /readyz, /metrics, /admin)")
	fs.StringVar(&c.NodeID, "node-id", "", "this node's id (the pod name)")
	fs.StringVar(&peers, "peers", "", "bootstrap members, id@host:port,... (text-protocol ports)")
	fs.StringVar(&seeds, "seeds", "", "alias of --peers")
	fs.StringVar(&c.Mode, "mode", ModeStandalone, "standalone|raft|replicated")
	fs.StringVar(&dataDirs, "data-dirs", "", "comma-separated data directories (XFS mounts)")
	fs.StringVar(&rawVLogs, "raw-vlogs", "", "comma-separated raw VLog block devices, one per data dir")
	fs.StringVar(&c.AdminToken, "admin-token", getenv(EnvAdminToken), "bearer token for /admin/* (env "+EnvAdminToken+")")
	fs.StringVar(&c.AuthConfig, "auth-config", "", "RBAC configuration file")
	fs.StringVar(&c.Net, "net", "go", "network front-end: go|cpp|uring|poll")
	fs.StringVar(&join, "join", "", "members to join through, host:port,... (text-protocol ports)")
	fs.StringVar(&c.AdvertiseAddr, "advertise-addr", "", "host:port other members reach this node's text port at")
	fs.IntVar(&c.ReplicationFactor, "replication-factor", envInt(EnvReplicationFactor, 1), "owners per partition (env "+EnvReplicationFactor+")")
	fs.StringVar(&c.MaxMapCountFile, "sim-max-map-count-file", envStr(EnvMaxMapCountFile, "/proc/sys/vm/max_map_count"), "where vm.max_map_count is read")
	fs.IntVar(&c.PartitionCount, "sim-partition-count", envInt(EnvPartitionCount, 64), "partitions of a new cluster")
	fs.Float64Var(&c.MoveRate, "sim-move-rate", envFloat(EnvMoveRate, 1000), "keys per second moved on membership change; 0 pauses moves")
	fs.DurationVar(&c.IndexRebuild, "sim-index-rebuild", envDur(EnvIndexRebuild, 3*time.Second), "search index rebuild time after reopening existing data")
	fs.DurationVar(&c.OpenDelay, "sim-open-delay", envDur(EnvOpenDelay, 0), "time to open the data (/readyz 503 meanwhile)")
	fs.StringVar(&refuse, "sim-refuse-delete", getenv(EnvRefuseDelete), "refuse DELETE /admin/cluster/members/<id> with 409 or 500")
	fs.IntVar(&c.CrashMidMove, "sim-crash-mid-move", envInt(EnvCrashMidMove, 0), "exit after moving this many keys (once per data dir)")
	fs.DurationVar(&c.CheckpointEvery, "sim-checkpoint-interval", envDur(EnvCheckpointEvery, 30*time.Second), "periodic checkpoint interval")
	fs.DurationVar(&c.GossipInterval, "sim-gossip-interval", 300*time.Millisecond, "membership anti-entropy interval")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if peers == "" {
		peers = seeds
	}
	if c.Peers, err = parsePeers(peers); err != nil {
		return Config{}, err
	}
	c.DataDirs = splitList(dataDirs)
	c.RawVLogs = splitList(rawVLogs)
	c.Join = splitList(join)
	c.URingBridge = strings.ToLower(strings.TrimSpace(envStr(EnvURingBridge, URingOff)))
	c.URingProbe = strings.ToLower(strings.TrimSpace(envStr(EnvSimURing, URingProbeKernel)))
	c.Index = strings.ToLower(strings.TrimSpace(getenv(EnvIndex)))
	if c.Index == "" {
		c.Index = IndexNative
	}
	if v := getenv(EnvCacheMaxSizeMB); v != "" {
		if c.CacheMaxSizeMB, err = strconv.Atoi(v); err != nil {
			return Config{}, fmt.Errorf("%s=%q is not a number of MiB", EnvCacheMaxSizeMB, v)
		}
	}
	switch refuse {
	case "", "0", "false":
	case "409", "500":
		c.RefuseDelete, _ = strconv.Atoi(refuse)
	default:
		return Config{}, fmt.Errorf("--sim-refuse-delete=%q: want 409 or 500", refuse)
	}
	return c, nil
}

// Check applies the server's refusals: the C++ network front-end with raft, replicated or
// -auth-config, the native index below the vm.max_map_count minimum, missing data dirs.
func (c *Config) Check() error {
	switch c.Mode {
	case ModeStandalone, ModeRaft, ModeReplicated:
	default:
		return fmt.Errorf("-mode=%q: want standalone, raft or replicated", c.Mode)
	}
	switch c.Net {
	case "go":
	case "cpp", "uring", "poll":
		if c.Mode != ModeStandalone {
			return fmt.Errorf("-net=%s is refused in -mode %s: the C++ network front-end supports neither raft nor replicated mode; use -net=go", c.Net, c.Mode)
		}
		if c.AuthConfig != "" {
			return fmt.Errorf("-net=%s is refused with -auth-config: the C++ network front-end does not enforce RBAC; use -net=go", c.Net)
		}
	default:
		return fmt.Errorf("-net=%q: want go, cpp, uring or poll", c.Net)
	}
	switch c.Index {
	case IndexMap:
	case IndexNative:
		n, err := readMaxMapCount(c.MaxMapCountFile)
		if err != nil {
			return fmt.Errorf("native index: cannot read vm.max_map_count: %w; set %s=map to use the map index", err, EnvIndex)
		}
		if n < MinMaxMapCount {
			return fmt.Errorf("native index needs vm.max_map_count >= %d, the node has %d: raise it on the node (a container cannot set it) or set %s=map", MinMaxMapCount, n, EnvIndex)
		}
	default:
		return fmt.Errorf("%s=%q: want map (or unset for the native index)", EnvIndex, c.Index)
	}
	switch c.URingBridge {
	case "", URingOff, URingOn, URingSQPoll:
	default:
		return fmt.Errorf("%s=%q: want off, on or sqpoll", EnvURingBridge, c.URingBridge)
	}
	switch c.URingProbe {
	case "", URingProbeKernel, URingProbeAllowed, URingProbeBlocked:
	default:
		return fmt.Errorf("%s=%q: want probe, allowed or blocked", EnvSimURing, c.URingProbe)
	}
	if len(c.DataDirs) == 0 {
		return errors.New("--data-dirs is required")
	}
	for _, d := range c.DataDirs {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("data dir %s: %w", d, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("data dir %s is not a directory", d)
		}
	}
	if len(c.RawVLogs) > 0 {
		if len(c.RawVLogs) != len(c.DataDirs) {
			return fmt.Errorf("--raw-vlogs has %d devices for %d data dirs: each data dir needs its raw VLog device", len(c.RawVLogs), len(c.DataDirs))
		}
		for _, d := range c.RawVLogs {
			if _, err := os.Stat(d); err != nil {
				return fmt.Errorf("raw VLog %s: %w", d, err)
			}
		}
	}
	if c.AuthConfig != "" {
		if _, err := os.ReadFile(c.AuthConfig); err != nil {
			return fmt.Errorf("-auth-config: %w", err)
		}
	}
	if c.ReplicationFactor < 1 {
		return fmt.Errorf("--replication-factor=%d: want at least 1", c.ReplicationFactor)
	}
	if c.PartitionCount < 1 {
		return fmt.Errorf("--sim-partition-count=%d: want at least 1", c.PartitionCount)
	}
	if c.MoveRate < 0 {
		return fmt.Errorf("--sim-move-rate=%v: want >= 0", c.MoveRate)
	}
	if c.Mode != ModeStandalone {
		if c.NodeID == "" {
			return fmt.Errorf("--node-id is required in -mode %s", c.Mode)
		}
		if !c.inPeers() && len(c.Join) == 0 && len(c.Peers) > 0 {
			return fmt.Errorf("node %s is not in --peers and --join is not set: list it in --peers or give --join", c.NodeID)
		}
		if len(c.Join) > 0 && c.selfAddr() == "" {
			return errors.New("--join needs --advertise-addr (or --addr with a host)")
		}
	}
	if c.NodeID == "" {
		c.NodeID = "standalone"
	}
	return nil
}

func (c *Config) inPeers() bool {
	for _, p := range c.Peers {
		if p.ID == c.NodeID {
			return true
		}
	}
	return false
}

// selfAddr is the text address other members use: --advertise-addr, else this node's
// --peers entry, else --addr when it names a host.
func (c *Config) selfAddr() string {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr
	}
	for _, p := range c.Peers {
		if p.ID == c.NodeID {
			return p.Addr
		}
	}
	if host, _, err := net.SplitHostPort(c.Addr); err == nil && host != "" && host != "0.0.0.0" && host != "::" {
		return c.Addr
	}
	return ""
}

func readMaxMapCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

func parsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, item := range splitList(s) {
		id, addr, ok := strings.Cut(item, "@")
		if !ok || id == "" {
			return nil, fmt.Errorf("--peers entry %q: want id@host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers entry %q: %w", item, err)
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// uringBridgeState is INFO's uring_bridge: off, or the bridge asked for when io_uring_setup
// is allowed, or fallback (pwrite) when it is refused. err is the refusal, for the log.
func (c *Config) uringBridgeState() (state string, err error) {
	if c.URingBridge == "" || c.URingBridge == URingOff {
		return URingOff, nil
	}
	switch c.URingProbe {
	case URingProbeAllowed:
		return c.URingBridge, nil
	case URingProbeBlocked:
		return URingFallback, errors.New("io_uring_setup blocked (" + EnvSimURing + "=blocked)")
	}
	if err := probeIOURing(c.URingBridge == URingSQPoll); err != nil {
		return URingFallback, err
	}
	return c.URingBridge, nil
}

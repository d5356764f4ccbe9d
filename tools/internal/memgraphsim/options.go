// Package memgraphsim is a Memgraph high-availability simulator: coordinators that form a
// real Raft group (hashicorp/raft), data instances with a small persisted graph store and
// SYNC replication, speaking Bolt through tools/internal/bolt. It exists so the memgraph
// operator can be tested end to end on a machine where no Memgraph binary can be installed;
// cmd/memgraph-sim/README.md says what it models and what it does not.
package memgraphsim

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

// Options are Memgraph's flags that the simulator honours, plus its own knobs.
type Options struct {
	BoltPort int
	// MetricsPort serves Memgraph's JSON metrics document (0: none); see metrics.go.
	MetricsPort         int
	BoltAddress         string
	ManagementPort      int
	CoordinatorPort     int
	CoordinatorID       int
	CoordinatorHostname string
	DataDirectory       string
	LogLevel            string
	AlsoLogToStderr     bool
	DataRecovery        bool
	RestoreReplication  bool
	InstanceDownTimeout time.Duration
	HealthCheckInterval time.Duration
	// InvariantLog is the JSONL file every role change is appended to ("" = none).
	InvariantLog string
	// BoltCertFile and BoltKeyFile serve Bolt over TLS when both are set, as in
	// Memgraph (one alone leaves Bolt plain, with a warning).
	BoltCertFile, BoltKeyFile string

	// Simulator knobs (env MEMGRAPH_SIM_*).
	RaftHeartbeat      time.Duration // follower timeout before an election; Memgraph: 1 s heartbeat
	RaftElection       time.Duration // election timeout (randomised up to 2x by hashicorp/raft)
	ReplicationTimeout time.Duration // how long a SYNC write waits for a replica's ack
	// PauseReplicationTo names registered replicas this data instance, while MAIN, sends
	// nothing to (MEMGRAPH_SIM_PAUSE_REPLICATION_TO, comma-separated): a fault knob that
	// keeps a replica behind (its replication link cut, its management port still up).
	PauseReplicationTo []string
	// AddressMap redirects every dial of a peer (MEMGRAPH_SIM_ADDRESS_MAP, addrmap.go); a
	// replica also binds the port its replication address maps to.
	AddressMap AddressMap

	// User and Password (MEMGRAPH_USER, MEMGRAPH_PASSWORD) create a data instance's first
	// user when its auth store in the data directory holds none; later starts ignore them.
	User, Password string
	// Licensed is true when both license env vars are set.
	Licensed bool
	// SnapshotRetention is --storage-snapshot-retention-count: the snapshots kept.
	SnapshotRetention int
	// WALEnabled is --storage-wal-enabled (Memgraph's default true): every commit is
	// appended to a WAL file in <data-directory>/wal; WALFileSize is
	// --storage-wal-file-size-kib in bytes.
	WALEnabled  bool
	WALFileSize int64
	// SnapshotDelay (MEMGRAPH_SIM_SNAPSHOT_DELAY) is how long CREATE SNAPSHOT takes to
	// write its file, commits going on meanwhile, as they do while Memgraph writes the
	// snapshot of a large graph.
	SnapshotDelay time.Duration
}

// Version is what SHOW VERSION answers: the Memgraph release the simulator follows, marked
// as the simulator's.
const Version = "3.12.1-sim"

// IsCoordinator says whether the process runs as a coordinator.
func (o Options) IsCoordinator() bool { return o.CoordinatorID > 0 && o.CoordinatorPort > 0 }

// IsHA says whether the process takes part in high availability (a coordinator or a data
// instance managed through its management port).
func (o Options) IsHA() bool { return o.IsCoordinator() || o.ManagementPort > 0 }

// BoltTLS says whether Bolt is served over TLS: Memgraph turns it on only when both the
// certificate and the key file are given.
func (o Options) BoltTLS() bool { return o.BoltCertFile != "" && o.BoltKeyFile != "" }

// Addr joins the bind host with a port.
func (o Options) Addr(port int) string { return net.JoinHostPort(o.BoltAddress, strconv.Itoa(port)) }

// CoordinatorServer is the coordinator's own Raft address as other coordinators dial it.
func (o Options) CoordinatorServer() string {
	host := o.CoordinatorHostname
	if host == "" {
		host = o.BoltAddress
	}
	return net.JoinHostPort(host, strconv.Itoa(o.CoordinatorPort))
}

// LicenseError is what Memgraph prints when HA is requested without a license.
const LicenseError = "Access to high availability requires an enterprise license: set MEMGRAPH_ENTERPRISE_LICENSE and MEMGRAPH_ORGANIZATION_NAME"

// envOverrides are Memgraph's environment variables that take precedence over flags.
var envOverrides = map[string]string{
	"MEMGRAPH_BOLT_PORT":            "bolt-port",
	"MEMGRAPH_MANAGEMENT_PORT":      "management-port",
	"MEMGRAPH_COORDINATOR_PORT":     "coordinator-port",
	"MEMGRAPH_COORDINATOR_ID":       "coordinator-id",
	"MEMGRAPH_COORDINATOR_HOSTNAME": "coordinator-hostname",
	"MEMGRAPH_SIM_INVARIANT_LOG":    "sim-invariant-log",
}

// ParseOptions reads Memgraph-style flags and the environment. Flags Memgraph has but the
// simulator ignores (storage tuning, query modules, ...) are accepted and reported in the
// returned warnings, so unmodified manifests run.
func ParseOptions(args []string, getenv func(string) string) (Options, []string, error) {
	var o Options
	fs := flag.NewFlagSet("memgraph-sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.BoltPort, "bolt-port", 7687, "Bolt port")
	fs.IntVar(&o.MetricsPort, "metrics-port", 0, "port of the metrics endpoint, Memgraph's JSON document on /metrics (0: none)")
	fs.StringVar(&o.BoltAddress, "bolt-address", "0.0.0.0", "host every listener binds")
	fs.IntVar(&o.ManagementPort, "management-port", 0, "management server port (HA)")
	fs.IntVar(&o.CoordinatorPort, "coordinator-port", 0, "Raft port of a coordinator")
	fs.IntVar(&o.CoordinatorID, "coordinator-id", 0, "coordinator id")
	fs.StringVar(&o.CoordinatorHostname, "coordinator-hostname", "", "name other coordinators reach this one by")
	fs.StringVar(&o.DataDirectory, "data-directory", "/var/lib/memgraph", "data directory")
	fs.StringVar(&o.LogLevel, "log-level", "WARNING", "TRACE, DEBUG, INFO, WARNING, ERROR or CRITICAL")
	fs.BoolVar(&o.AlsoLogToStderr, "also-log-to-stderr", false, "log to stderr")
	fs.BoolVar(&o.DataRecovery, "data-recovery-on-startup", true, "recover the graph from the data directory")
	fs.BoolVar(&o.RestoreReplication, "replication-restore-state-on-startup", true, "restore the replication role")
	downSec := fs.Int("instance-down-timeout-sec", 5, "seconds without a health check answer before an instance is down")
	checkSec := fs.Int("instance-health-check-frequency-sec", 1, "seconds between health checks")
	fs.StringVar(&o.InvariantLog, "sim-invariant-log", "", "JSONL file of role changes (simulator only)")
	fs.StringVar(&o.BoltCertFile, "bolt-cert-file", "", "PEM certificate (chain) of the Bolt server; with --bolt-key-file, Bolt is TLS only")
	fs.StringVar(&o.BoltKeyFile, "bolt-key-file", "", "PEM private key of --bolt-cert-file")
	// Accepted because manifests pass them; they change nothing here.
	fs.BoolVar(&o.WALEnabled, "storage-wal-enabled", true, "append every commit to the write-ahead log in <data-directory>/wal")
	walKiB := fs.Int64("storage-wal-file-size-kib", DefaultWALFileSizeKiB, "size past which a WAL file is finalized")
	for _, name := range []string{"storage-snapshot-on-exit", "storage-properties-on-edges", "telemetry-enabled"} {
		fs.Bool(name, false, "ignored")
	}
	fs.IntVar(&o.SnapshotRetention, "storage-snapshot-retention-count", DefaultSnapshotRetention, "snapshots kept")
	for _, name := range []string{"storage-snapshot-interval-sec", "query-execution-timeout-sec", "monitoring-port"} {
		fs.Int(name, 0, "ignored")
	}
	for _, name := range []string{"experimental-enabled", "log-file", "nuraft-log-file", "storage-mode", "metrics-address", "monitoring-address", "memory-limit", "query-modules-directory"} {
		fs.String(name, "", "ignored")
	}

	known, warnings := splitUnknownFlags(fs, args)
	if err := fs.Parse(known); err != nil {
		return o, warnings, err
	}
	if fs.NArg() > 0 {
		warnings = append(warnings, fmt.Sprintf("ignoring arguments %q", fs.Args()))
	}
	for env, name := range envOverrides {
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return o, warnings, fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	if (o.BoltCertFile == "") != (o.BoltKeyFile == "") {
		// Memgraph's own behaviour: one of the pair alone is ignored.
		warnings = append(warnings, "Using non-secure Bolt connection (without SSL): --bolt-cert-file and --bolt-key-file must both be set")
	}
	o.WALFileSize = *walKiB * 1024
	o.InstanceDownTimeout = time.Duration(*downSec) * time.Second
	o.HealthCheckInterval = time.Duration(*checkSec) * time.Second
	o.User, o.Password = getenv("MEMGRAPH_USER"), getenv("MEMGRAPH_PASSWORD")
	o.Licensed = getenv("MEMGRAPH_ENTERPRISE_LICENSE") != "" && getenv("MEMGRAPH_ORGANIZATION_NAME") != ""

	var err error
	if o.RaftHeartbeat, err = durationEnv(getenv, "MEMGRAPH_SIM_RAFT_HEARTBEAT", 2*time.Second); err != nil {
		return o, warnings, err
	}
	if o.RaftElection, err = durationEnv(getenv, "MEMGRAPH_SIM_RAFT_ELECTION", 2*time.Second); err != nil {
		return o, warnings, err
	}
	if o.ReplicationTimeout, err = durationEnv(getenv, "MEMGRAPH_SIM_REPLICATION_TIMEOUT", 2*time.Second); err != nil {
		return o, warnings, err
	}
	if v := getenv("MEMGRAPH_SIM_SNAPSHOT_DELAY"); v != "" {
		if o.SnapshotDelay, err = durationEnv(getenv, "MEMGRAPH_SIM_SNAPSHOT_DELAY", 0); err != nil {
			return o, warnings, err
		}
	}
	for _, name := range strings.Split(getenv("MEMGRAPH_SIM_PAUSE_REPLICATION_TO"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.PauseReplicationTo = append(o.PauseReplicationTo, name)
		}
	}
	if o.AddressMap, err = ParseAddressMap(getenv("MEMGRAPH_SIM_ADDRESS_MAP")); err != nil {
		return o, warnings, fmt.Errorf("MEMGRAPH_SIM_ADDRESS_MAP: %w", err)
	}
	return o, warnings, o.validate()
}

func (o Options) validate() error {
	if o.IsHA() && !o.Licensed {
		return errors.New(LicenseError) //nolint:staticcheck // Memgraph's own wording, capital and all
	}
	if (o.CoordinatorID > 0) != (o.CoordinatorPort > 0) {
		return errors.New("--coordinator-id and --coordinator-port must be set together")
	}
	if o.InstanceDownTimeout <= 0 || o.HealthCheckInterval <= 0 {
		return errors.New("--instance-down-timeout-sec and --instance-health-check-frequency-sec must be positive")
	}
	for _, p := range []int{o.BoltPort, o.ManagementPort, o.CoordinatorPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("port %d out of range", p)
		}
	}
	if o.DataDirectory == "" {
		return errors.New("--data-directory must not be empty")
	}
	return nil
}

// splitUnknownFlags drops flags the set does not define, with a warning each, so an unknown
// Memgraph flag does not stop the process. A dropped flag written "--name value" takes its
// value with it.
func splitUnknownFlags(fs *flag.FlagSet, args []string) (known, warnings []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			known = append(known, args[i:]...)
			return known, warnings
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil {
			known = append(known, a)
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && (!ok || !b.IsBoolFlag()) && i+1 < len(args) {
				i++
				known = append(known, args[i])
			}
			continue
		}
		warnings = append(warnings, fmt.Sprintf("unknown flag --%s ignored", name))
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
		}
	}
	return known, warnings
}

func durationEnv(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration like 500ms", name, v)
	}
	return d, nil
}

// Getenv is os.Getenv, for ParseOptions callers.
func Getenv(name string) string { return os.Getenv(name) }

// Package server implements the nodeagent.v1.NodeAgent gRPC service: it decides what may be
// done to the node and asks package host to do it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// XFSLabel marks filesystems the agent made (XFS labels hold at most 12 bytes).
const XFSLabel = "opsuite-na"

// minXFSBytes is the smallest filesystem mkfs.xfs (xfsprogs 5.19 and later) accepts.
const minXFSBytes = 300 << 20

// Host is what the server needs from the node; package host implements it.
type Host interface {
	Disks() ([]host.Disk, error)
	DiskByPath(path string) (host.Disk, error)
	Probe(ctx context.Context, dev string) (host.Signature, error)
	Mounts() ([]host.Mount, error)
	BootDisks() (map[string]bool, error)
	CheckExclusive(dev string) error
	PartitionSplit(ctx context.Context, d host.Disk, xfsPercent uint32, diskGUID string) (string, string, error)
	DeviceSize(dev string) (int64, error)
	MkfsXFS(ctx context.Context, dev, label, uuid string) error
	Wipe(ctx context.Context, dev string, partitions []string) error
	MountXFS(dev, target string) error
	BindMount(source, target string) error
	Unmount(target string) error
	RemoveDir(dir string) error
	MountedAt(target string) (host.Mount, bool, error)
	ReadSysctl(name string) (int64, error)
	WriteSysctl(name string, value int64) error
	Capacity() (cpuMillis, memoryBytes int64)
	ReadState(path string) ([]byte, error)
	WriteState(path string, data []byte) error
}

// NodeLabels returns the labels of the agent's Node.
type NodeLabels interface {
	NodeLabels(ctx context.Context) (map[string]string, error)
}

// StaticLabels is a fixed label set, for an agent without access to the apiserver.
type StaticLabels map[string]string

// NodeLabels returns the fixed labels.
func (l StaticLabels) NodeLabels(context.Context) (map[string]string, error) { return l, nil }

// Options configure the server; cmd validates them.
type Options struct {
	NodeName        string
	Version         string
	PoolLabelPrefix string
	// AgentRoot holds the agent's own mounts, one directory per filesystem UUID.
	AgentRoot string
	// PVRoot is the only tree under which the agent bind-mounts PV source paths.
	PVRoot           string
	StateFile        string
	AllowRaiseSysctl bool
	// AllowLoopDevices lets tests prepare loop devices; never set in production.
	AllowLoopDevices bool
	// SysctlMinimums are reported in every node report.
	SysctlMinimums map[string]int64
}

// Server is the NodeAgent service.
type Server struct {
	nodeagentv1.UnimplementedNodeAgentServer

	opts   Options
	host   Host
	labels NodeLabels
	log    *slog.Logger

	mu      sync.Mutex // guards records, missing and the state file
	records []record
	missing map[string]string // device -> why its prepared filesystem is not in place

	locksMu sync.Mutex
	locks   map[string]*sync.Mutex // one per device: serializes work on it

	sysctlMu sync.Mutex
}

// New loads the persisted state.
func New(opts Options, h Host, labels NodeLabels, log *slog.Logger) (*Server, error) {
	b, err := h.ReadState(opts.StateFile)
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	recs, err := decodeState(b)
	if err != nil {
		return nil, err
	}
	if labels == nil {
		labels = StaticLabels{}
	}
	return &Server{
		opts: opts, host: h, labels: labels, log: log,
		records: recs, missing: map[string]string{}, locks: map[string]*sync.Mutex{},
	}, nil
}

// Restore puts back the mounts of every ready device, as after a reboot. A device that no
// longer carries its filesystem is reported missing, never reformatted.
func (s *Server) Restore(ctx context.Context) error {
	var errs []error
	for _, r := range s.snapshot() {
		if r.Phase != phaseReady {
			continue
		}
		unlock := s.lockDevice(r.Device)
		err := s.ensureMounted(ctx, r)
		unlock()
		if err != nil {
			s.log.Error("Restoring prepared device failed", "device", r.Device, "pvPath", r.PVPath, "err", err)
			errs = append(errs, err)
			continue
		}
		s.log.Info("Restored prepared device", "device", r.Device, "pvPath", r.PVPath)
	}
	return errors.Join(errs...)
}

func (s *Server) lockDevice(dev string) func() {
	s.locksMu.Lock()
	m, ok := s.locks[dev]
	if !ok {
		m = &sync.Mutex{}
		s.locks[dev] = m
	}
	s.locksMu.Unlock()
	m.Lock()
	return m.Unlock
}

func (s *Server) snapshot() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.records...)
}

// lookup returns the current record of a device.
func (s *Server) lookup(dev string) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.Device == dev {
			return r, true
		}
	}
	return record{}, false
}

// saveLocked writes the records; s.mu must be held.
func (s *Server) saveLocked() error {
	b, err := encodeState(s.records)
	if err != nil {
		return err
	}
	if err := s.host.WriteState(s.opts.StateFile, b); err != nil {
		return status.Errorf(codes.Internal, "writing state: %v", err)
	}
	return nil
}

// update replaces a device's record (or removes it when r is nil) and persists the state.
func (s *Server) update(dev string, r *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.records[:0:0]
	for _, old := range s.records {
		if old.Device != dev {
			out = append(out, old)
		}
	}
	if r != nil {
		out = append(out, *r)
	}
	s.records = out
	if r == nil || r.Phase == phaseReady {
		delete(s.missing, dev)
	}
	return s.saveLocked()
}

func (s *Server) setMissing(dev, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missing[dev] = why
}

// facts is what the agent observed about one disk, enough to judge it.
type facts struct {
	disk        host.Disk
	sig         host.Signature
	partSigs    map[string]host.Signature
	mountpoints map[string][]string // device path -> mount points, disk and partitions
	boot        bool
	busy        bool
	unreadable  bool // probing or opening failed: nothing is known, so nothing may be done
}

func (s *Server) observe(ctx context.Context, d host.Disk, mounts []host.Mount, boot map[string]bool, probeBusy bool) (facts, error) {
	f := facts{disk: d, boot: boot[d.Name], partSigs: map[string]host.Signature{}, mountpoints: map[string][]string{}}
	byMajMin := map[string][]string{}
	for _, m := range mounts {
		byMajMin[m.MajMin] = append(byMajMin[m.MajMin], m.MountPoint)
	}
	f.mountpoints[d.Path] = byMajMin[d.MajMin]
	var err error
	if f.sig, err = s.host.Probe(ctx, d.Path); err != nil {
		f.unreadable = true
	}
	for _, p := range d.Partitions {
		f.mountpoints[p.Path] = byMajMin[p.MajMin]
		if f.partSigs[p.Path], err = s.host.Probe(ctx, p.Path); err != nil {
			f.unreadable = true
		}
	}
	if probeBusy && !f.boot {
		for _, dev := range append([]string{d.Path}, partPaths(d)...) {
			switch err := s.host.CheckExclusive(dev); {
			case errors.Is(err, host.ErrBusy):
				f.busy = true
			case err != nil:
				f.unreadable = true
			}
		}
	}
	return f, ctx.Err()
}

func partPaths(d host.Disk) []string {
	var out []string
	for _, p := range d.Partitions {
		out = append(out, p.Path)
	}
	return out
}

// ineligible says why the agent must not touch a disk it does not own, "" when it may.
// The checks run from the most to the least fundamental so the reason is the one that matters.
func ineligible(f facts, allowLoop bool) string {
	d := f.disk
	switch {
	case f.boot:
		return "is the boot disk"
	case d.Kind == "loop" && !allowLoop:
		return "is a loop device (allowed only with --allow-loop-devices, for tests)"
	case d.Kind == "zram" || d.Kind == "ram":
		return fmt.Sprintf("is a %s device", d.Kind)
	case d.ReadOnly:
		return "is read-only"
	case f.unreadable:
		return "cannot be read by the agent, so its contents are unknown"
	}
	for _, dev := range append([]string{d.Path}, partPaths(d)...) {
		if mps := f.mountpoints[dev]; len(mps) > 0 {
			return fmt.Sprintf("is mounted (%s at %s)", dev, mps[0])
		}
	}
	switch {
	case len(d.Holders) > 0:
		return fmt.Sprintf("is held by %s", strings.Join(d.Holders, ","))
	case f.busy:
		return "is in use (the kernel refuses exclusive access)"
	case f.sig.PTType != "":
		return fmt.Sprintf("has a partition table (%s) the agent did not create", f.sig.PTType)
	case len(d.Partitions) > 0:
		return "has partitions the agent did not create"
	case f.sig.Type != "":
		return fmt.Sprintf("holds a %s signature the agent did not create", f.sig.Type)
	}
	return ""
}

// resumable says why an interrupted preparation must not be resumed on a disk, "" when it may:
// every signature on it must be one the agent wrote for this record.
func resumable(f facts, r record) string {
	if f.boot {
		return "is the boot disk"
	}
	for _, dev := range append([]string{f.disk.Path}, partPaths(f.disk)...) {
		if mps := f.mountpoints[dev]; len(mps) > 0 {
			return fmt.Sprintf("is mounted (%s at %s)", dev, mps[0])
		}
	}
	if f.busy {
		return "is in use (the kernel refuses exclusive access)"
	}
	if f.unreadable {
		return "cannot be read by the agent, so its contents are unknown"
	}
	ours := func(sig host.Signature) bool {
		return sig.Empty() || (sig.Type == "xfs" && sig.UUID == r.FSUUID) ||
			(sig.PTType != "" && r.DiskGUID != "" && strings.EqualFold(sig.PTUUID, r.DiskGUID))
	}
	if !ours(f.sig) {
		return "no longer carries what the agent wrote there"
	}
	return ""
}

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
	BootID() (string, error)
	CheckExclusive(dev string) error
	Users(ctx context.Context, d host.Disk) ([]string, error)
	CheckFree(ctx context.Context, d host.Disk) error
	CheckBeneath(root, target string) error
	PartitionSplit(ctx context.Context, d host.Disk, xfsPercent uint32, diskGUID string) (string, string, error)
	RegisterSplit(ctx context.Context, d host.Disk) error
	PartitionUUID(ctx context.Context, dev string, n int) (string, error)
	DeviceSize(dev string) (int64, error)
	MkfsXFS(ctx context.Context, d host.Disk, dev, label, uuid string) error
	Wipe(ctx context.Context, d host.Disk, partitions []string, method host.WipeMethod) error
	MountXFS(d host.Disk, dev, root, target string) error
	BindMount(source, root, target string) error
	Unmount(root, target string) error
	RemoveDir(dir string) error
	MountedAt(target string) (host.Mount, bool, error)
	ReadSysctl(name string) (int64, error)
	WriteSysctl(name string, value int64) error
	Capacity() (cpuMillis, memoryBytes int64)
	FilesystemUsage(target string) (size, avail int64, err error)
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
	// Metrics counts disk operations (nil: none).
	Metrics *Metrics
}

// Server is the NodeAgent service.
//
// Locks, always taken in this order: a record's lock (one per filesystem UUID: serializes
// preparing, restoring and releasing it), then a device's lock (one per kernel name:
// serializes everything that probes or writes the device), then s.mu (records and the state
// file; never held while probing or writing a device).
type Server struct {
	nodeagentv1.UnimplementedNodeAgentServer

	opts   Options
	host   Host
	labels NodeLabels
	log    *slog.Logger
	bootID string

	mu      sync.Mutex // guards records, missing and the state file
	records []record
	missing map[string]string // FSUUID -> why its prepared filesystem is not in place

	locksMu sync.Mutex
	locks   map[string]chan struct{} // "device:<path>" and "record:<fsUUID>"; see lock

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
	bootID, err := h.BootID()
	if err != nil {
		return nil, err
	}
	if labels == nil {
		labels = StaticLabels{}
	}
	return &Server{
		opts: opts, host: h, labels: labels, log: log, bootID: bootID,
		records: recs, missing: map[string]string{}, locks: map[string]chan struct{}{},
	}, nil
}

// Restore puts back the mounts of every ready device, found by identity wherever its kernel
// name now is, as after a reboot. A record no device carries is reported missing, never
// re-made on whatever now has its old name.
func (s *Server) Restore(ctx context.Context) error {
	var errs []error
	for _, r := range s.snapshot() {
		if r.Phase != phaseReady {
			continue
		}
		dev, err := s.restoreOne(ctx, r.FSUUID)
		if err != nil {
			s.log.Error("Restoring prepared device failed", "fsUUID", r.FSUUID, "lastDevice", r.Device, "pvPath", r.PVPath, "err", err)
			errs = append(errs, err)
			continue
		}
		s.log.Info("Restored prepared device", "device", dev, "fsUUID", r.FSUUID, "pvPath", r.PVPath)
	}
	return errors.Join(errs...)
}

func (s *Server) restoreOne(ctx context.Context, key string) (string, error) {
	unlock, err := s.lockRecord(ctx, key)
	if err != nil {
		return "", err
	}
	defer unlock()
	r, ok := s.lookup(key)
	if !ok || r.Phase != phaseReady {
		return "", nil // released meanwhile
	}
	l, err := s.locate(ctx, r)
	if err != nil {
		return "", err
	}
	if l == nil {
		return "", s.notOnNode(r)
	}
	defer l.unlock()
	if _, err := s.ensureMounted(ctx, r, l.facts); err != nil {
		return "", err
	}
	return l.facts.disk.Path, nil
}

// notOnNode marks a ready record missing and says so.
func (s *Server) notOnNode(r record) error {
	why := fmt.Sprintf("no device on this node carries the agent's filesystem %s of pv_path %s (last seen at %s)", r.FSUUID, r.PVPath, r.Device)
	if r.Phase == phaseReady {
		s.setMissing(r.FSUUID, why)
	}
	return status.Error(codes.FailedPrecondition, why)
}

// lock takes the lock of a key, waiting no longer than the call may: a call stuck on a hung
// disk holds that disk's lock, and the calls queued behind it give up at their own deadline
// (DeadlineExceeded, or Canceled) instead of piling up.
func (s *Server) lock(ctx context.Context, key string) (func(), error) {
	s.locksMu.Lock()
	m, ok := s.locks[key]
	if !ok {
		m = make(chan struct{}, 1)
		s.locks[key] = m
	}
	s.locksMu.Unlock()
	select {
	case m <- struct{}{}:
		return func() { <-m }, nil
	case <-ctx.Done():
		return nil, status.FromContextError(fmt.Errorf("waiting for %s, busy with another call: %w", key, ctx.Err())).Err()
	}
}

func (s *Server) lockDevice(ctx context.Context, dev string) (func(), error) {
	return s.lock(ctx, "device:"+dev)
}

func (s *Server) lockRecord(ctx context.Context, key string) (func(), error) {
	return s.lock(ctx, "record:"+key)
}

func (s *Server) snapshot() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.records...)
}

// lookup returns the current record of a filesystem UUID.
func (s *Server) lookup(key string) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.FSUUID == key {
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

// update replaces a record (or removes it when r is nil) and persists the state.
func (s *Server) update(key string, r *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.records[:0:0]
	for _, old := range s.records {
		if old.FSUUID != key {
			out = append(out, old)
		}
	}
	if r != nil {
		out = append(out, *r)
	}
	s.records = out
	if r == nil || r.Phase == phaseReady {
		delete(s.missing, key)
	}
	return s.saveLocked()
}

// updateHints records where a record's device was found, persisting only a change.
func (s *Server) updateHints(key string, d host.Disk) (record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.records {
		if r.FSUUID != key {
			continue
		}
		xfsDev, rawDev := devicesOf(r, d)
		if r.Device == d.Path && r.XFSDevice == xfsDev && r.RawDevice == rawDev {
			return r, nil
		}
		s.log.Info("Found prepared device under a new name", "fsUUID", key, "from", r.Device, "to", d.Path)
		r.Device, r.XFSDevice, r.RawDevice = d.Path, xfsDev, rawDev
		s.records[i] = r
		return r, s.saveLocked()
	}
	return record{}, status.Errorf(codes.Aborted, "the record of filesystem %s was released meanwhile", key)
}

// setRawPartUUID records the raw partition GUID of a record written before the agent kept it.
func (s *Server) setRawPartUUID(key, id string) (record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.records {
		if r.FSUUID == key {
			r.RawPartUUID = id
			s.records[i] = r
			return r, s.saveLocked()
		}
	}
	return record{}, status.Errorf(codes.Aborted, "the record of filesystem %s was released meanwhile", key)
}

func (s *Server) setMissing(key, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missing[key] = why
}

// facts is what the agent observed about one disk, enough to judge it.
type facts struct {
	disk        host.Disk
	sig         host.Signature
	partSigs    map[string]host.Signature
	mountpoints map[string][]string // device path -> mount points, disk and partitions
	boot        bool
	busy        bool
	users       []string // what else uses the disk or a partition (host.Users)
	unreadable  bool     // probing or opening failed: nothing is known, so nothing may be done
}

// observeLocked probes a disk whose device lock the caller holds.
func (s *Server) observeLocked(ctx context.Context, d host.Disk, mounts []host.Mount, boot map[string]bool) (facts, error) {
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
	if !f.boot {
		if f.users, err = s.host.Users(ctx, d); err != nil && ctx.Err() == nil {
			f.unreadable = true
		}
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

// observe probes a disk under its device lock, so that a slow probe holds up only calls on
// the same device. The disk is re-read under the lock: its name may stand for other media
// than when it was listed. ok is false when the disk went away meanwhile.
func (s *Server) observe(ctx context.Context, path string, mounts []host.Mount, boot map[string]bool) (f facts, ok bool, err error) {
	unlock, err := s.lockDevice(ctx, path)
	if err != nil {
		return facts{}, false, err
	}
	defer unlock()
	d, ok := s.diskAt(path)
	if !ok {
		return facts{}, false, nil
	}
	f, err = s.observeLocked(ctx, d, mounts, boot)
	return f, err == nil, err
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
	case kindIneligible(d.Kind, allowLoop) != "":
		return kindIneligible(d.Kind, allowLoop)
	case d.OfferedBy == "":
		return NotOffered
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
	case len(f.users) > 0:
		return "is in use: " + strings.Join(f.users, "; ")
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

// NotOffered is why a disk no allowlist entry offers is never prepared.
const NotOffered = "is not offered by the node's disk allowlist (--device-allow, --device-allow-by-id, --device-allow-model): the agent reports it and never prepares it"

// kindIneligible says why a disk of this kind (host.KindOf) is never a candidate, "" when it
// may be: an allowlist of whole-disk kinds, so device-mapper, md, nbd, rbd, zram, ram, optical
// drives, partitions and anything new stay out.
func kindIneligible(kind string, allowLoop bool) string {
	switch kind {
	case host.KindNVMe, host.KindSD, host.KindVD, host.KindXVD:
		return ""
	case host.KindLoop:
		if allowLoop {
			return ""
		}
		return "is a loop device (allowed only with --allow-loop-devices, for tests)"
	}
	return "is not a whole disk of a kind the agent prepares (nvme, sd, vd, xvd)"
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
	if len(f.users) > 0 {
		return "is in use: " + strings.Join(f.users, "; ")
	}
	if f.busy {
		return "is in use (the kernel refuses exclusive access)"
	}
	if f.unreadable {
		return "cannot be read by the agent, so its contents are unknown"
	}
	if !onlyOurs(r, f) {
		return "no longer carries what the agent wrote there"
	}
	return ""
}

// probeError maps a failure to observe a device: a status (a lock wait that ran out) stays
// as it is, the call's deadline or cancellation becomes DeadlineExceeded or Canceled, and
// anything else is Internal.
func probeError(dev string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(fmt.Errorf("probing %s: %w", dev, err)).Err()
	}
	return status.Errorf(codes.Internal, "probing %s: %v", dev, err)
}

package server

import (
	"context"
	"strings"

	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// match is how an observed disk relates to a record.
type match int

const (
	matchNone match = iota
	// matchReserved: an interrupted preparation's own media (same boot and disk sequence, or
	// same WWN or serial) with nothing on it but what the agent wrote for the record.
	matchReserved
	// matchWritten: the disk carries what the agent wrote for the record (its filesystem UUID,
	// or its partition table's GUID).
	matchWritten
)

// identify decides whether a disk is a record's device, from what it carries and what the
// hardware says it is; never from its kernel name, except on kernels without disk sequence
// numbers, where a preparation reserved in this boot trusts the name it was reserved under.
func identify(r record, f facts, bootID string) match {
	d := f.disk
	if (r.WWN != "" && d.WWN != "" && r.WWN != d.WWN) || (r.Serial != "" && d.Serial != "" && r.Serial != d.Serial) {
		return matchNone // other hardware, whatever it carries (a cloned disk)
	}
	if carries(r, f) {
		return matchWritten
	}
	if r.Phase != phasePreparing || f.unreadable || !onlyOurs(r, f) {
		return matchNone
	}
	if sameMedia(r, d, bootID) || (r.WWN != "" && r.WWN == d.WWN) || (r.Serial != "" && r.Serial == d.Serial) {
		return matchReserved
	}
	return matchNone
}

func sameMedia(r record, d host.Disk, bootID string) bool {
	if r.BootID == "" || r.BootID != bootID {
		return false
	}
	if r.DiskSeq != 0 {
		return r.DiskSeq == d.DiskSeq
	}
	return d.DiskSeq == 0 && r.Device == d.Path
}

// carries says whether the disk holds the agent's filesystem or partition table of r.
func carries(r record, f facts) bool {
	xfsDev, _ := devicesOf(r, f.disk)
	sig := f.sig
	if xfsDev != f.disk.Path {
		if r.DiskGUID != "" && f.sig.PTType != "" && strings.EqualFold(f.sig.PTUUID, r.DiskGUID) {
			return true
		}
		sig = f.partSigs[xfsDev]
	}
	return sig.Type == "xfs" && sig.UUID == r.FSUUID
}

// onlyOurs says whether every signature on the disk and its partitions is empty or one the
// agent wrote for r.
func onlyOurs(r record, f facts) bool {
	ours := func(sig host.Signature) bool {
		return sig.Empty() || (sig.Type == "xfs" && sig.UUID == r.FSUUID) ||
			(sig.Type == "" && !sig.Ambivalent && sig.PTType != "" && r.DiskGUID != "" && strings.EqualFold(sig.PTUUID, r.DiskGUID))
	}
	if !ours(f.sig) {
		return false
	}
	for _, sig := range f.partSigs {
		if !ours(sig) {
			return false
		}
	}
	return true
}

// devicesOf names the XFS and raw devices of r on disk d: the disk itself, or its partitions.
func devicesOf(r record, d host.Disk) (xfsDev, rawDev string) {
	if r.XFSPercent == 0 {
		return d.Path, ""
	}
	return host.PartitionPath(d.Path, 1), host.PartitionPath(d.Path, 2)
}

// heldBy returns the record that holds a disk: one that identifies it, or one made on the same
// hardware or reserved on the same media, whose device the agent keeps until it is released.
func heldBy(f facts, recs []record, bootID string) (record, bool) {
	d := f.disk
	for _, r := range recs {
		if identify(r, f, bootID) != matchNone || sameHardware(r, d) || sameMedia(r, d, bootID) {
			return r, true
		}
	}
	return record{}, false
}

func sameHardware(r record, d host.Disk) bool {
	return (r.WWN != "" && r.WWN == d.WWN) || (r.Serial != "" && r.Serial == d.Serial)
}

// located is a record's device, found by identity and observed under its device lock, which
// the caller releases with unlock.
type located struct {
	facts  facts
	match  match
	unlock func()
}

// locate finds the device that identifies r: its last known name first, then every disk the
// agent may see. It returns nil when no device does. Only disks of a kind the agent prepares
// are probed; the boot disk is never one.
func (s *Server) locate(ctx context.Context, r record) (*located, error) {
	mounts, boot, err := s.mountTables()
	if err != nil {
		return nil, err
	}
	try := func(path string) (*located, error) {
		unlock, err := s.lockDevice(ctx, path)
		if err != nil {
			return nil, err
		}
		d, ok := s.diskAt(path)
		if !ok || boot[d.Name] || kindIneligible(d.Kind, s.opts.AllowLoopDevices) != "" {
			unlock()
			return nil, nil // a disk that went away, or is never the agent's, is not r's
		}
		f, err := s.observeLocked(ctx, d, mounts, boot)
		if err != nil {
			unlock()
			return nil, probeError(path, err)
		}
		if m := identify(r, f, s.bootID); m != matchNone {
			return &located{facts: f, match: m, unlock: unlock}, nil
		}
		unlock()
		return nil, nil
	}
	if l, err := try(r.Device); l != nil || err != nil {
		return l, err
	}
	disks, err := s.host.Disks()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing devices: %v", err)
	}
	for _, d := range disks {
		if d.Path == r.Device {
			continue
		}
		if l, err := try(d.Path); l != nil || err != nil {
			return l, err
		}
	}
	return nil, nil
}

// diskAt reads the disk now at path; false when there is none the agent may see.
func (s *Server) diskAt(path string) (host.Disk, bool) {
	d, err := s.host.DiskByPath(path)
	return d, err == nil
}

// mountTables reads what observing a disk needs: the agent's mounts and the boot disks.
func (s *Server) mountTables() ([]host.Mount, map[string]bool, error) {
	mounts, err := s.host.Mounts()
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "reading mounts: %v", err)
	}
	boot, err := s.host.BootDisks()
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "finding the boot disk: %v", err)
	}
	return mounts, boot, nil
}

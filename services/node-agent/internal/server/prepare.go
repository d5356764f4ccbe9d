package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PrepareDisks prepares devices for a PV source path; see the proto for the contract.
func (s *Server) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	if err := validatePrepare(req, s.opts.PVRoot); err != nil {
		return nil, err
	}
	recs, err := s.claim(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &nodeagentv1.PrepareDisksResponse{}
	for _, r := range recs {
		done, err := s.prepareOne(ctx, r.Device)
		if err != nil {
			return nil, err
		}
		resp.Disks = append(resp.Disks, toProto(done))
	}
	return resp, nil
}

// claim finds the records a request stands for: those already made for its pv_path (a
// repeat), or new ones reserved in the state before any device is touched.
func (s *Server) claim(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) ([]record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	sel := req.GetSelector()
	want := int(sel.GetCount())
	if len(sel.GetPaths()) > 0 {
		want = len(sel.GetPaths())
	}

	var existing []record
	for _, r := range s.records {
		if r.Claim == req.GetPvPath() {
			existing = append(existing, r)
		}
	}
	if len(existing) > 0 {
		if len(existing) != want || existing[0].XFSPercent != req.GetXfsPercent() || !samePaths(existing, s.canonical(sel.GetPaths())) {
			return nil, status.Errorf(codes.FailedPrecondition,
				"pv_path %s is already prepared with other settings; release it first", req.GetPvPath())
		}
		return existing, nil
	}
	for _, r := range s.records {
		if r.PVPath == req.GetPvPath() || isUnder(req.GetPvPath(), r.PVPath) || isUnder(r.PVPath, req.GetPvPath()) {
			return nil, status.Errorf(codes.FailedPrecondition, "pv_path %s overlaps pv_path %s of device %s", req.GetPvPath(), r.PVPath, r.Device)
		}
	}

	chosen, err := s.selectDevices(ctx, sel)
	if err != nil {
		return nil, err
	}
	var recs []record
	for _, d := range chosen {
		size := d.SizeBytes
		if p := req.GetXfsPercent(); p != 0 {
			size = size * int64(p) / 100
		}
		if size < minXFSBytes {
			return nil, status.Errorf(codes.FailedPrecondition,
				"device %s would get an XFS filesystem of %d MiB; XFS needs at least %d MiB", d.Path, size>>20, minXFSBytes>>20)
		}
		r := record{
			Device: d.Path, XFSDevice: d.Path, XFSPercent: req.GetXfsPercent(),
			FSUUID: newUUID(), Claim: req.GetPvPath(), PVPath: req.GetPvPath(), Phase: phasePreparing,
		}
		if r.XFSPercent != 0 {
			r.DiskGUID = newUUID()
			r.XFSDevice = host.PartitionPath(d.Path, 1)
			r.RawDevice = host.PartitionPath(d.Path, 2)
		}
		if len(chosen) > 1 {
			r.PVPath = filepath.Join(req.GetPvPath(), filepath.Base(d.Path))
		}
		r.MountPath = filepath.Join(s.opts.AgentRoot, "mounts", r.FSUUID)
		recs = append(recs, r)
	}
	s.records = append(s.records, recs...)
	if err := s.saveLocked(); err != nil {
		s.records = s.records[:len(s.records)-len(recs)]
		return nil, err
	}
	for _, r := range recs {
		s.log.Info("Reserved device", "device", r.Device, "pvPath", r.PVPath, "xfsPercent", r.XFSPercent)
	}
	return recs, nil
}

func samePaths(recs []record, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	var have []string
	for _, r := range recs {
		have = append(have, r.Device)
	}
	want := slices.Clone(paths)
	sort.Strings(have)
	sort.Strings(want)
	return slices.Equal(have, want)
}

// canonical maps device paths (possibly /dev/disk/by-id links) to the kernel names records
// keep, so a repeat through a link is recognised; unknown paths stay as given.
func (s *Server) canonical(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if d, err := s.host.DiskByPath(p); err == nil {
			p = d.Path
		}
		out = append(out, p)
	}
	return out
}

func isUnder(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !startsWithDotDot(rel)
}

func startsWithDotDot(rel string) bool { return len(rel) >= 3 && rel[:3] == "../" }

// selectDevices resolves a selector to eligible disks; s.mu is held so that two requests
// cannot pick the same blank disk.
func (s *Server) selectDevices(ctx context.Context, sel *nodeagentv1.DeviceSelector) ([]host.Disk, error) {
	mounts, err := s.host.Mounts()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading mounts: %v", err)
	}
	boot, err := s.host.BootDisks()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "finding the boot disk: %v", err)
	}
	owner := map[string]string{}
	for _, r := range s.records {
		owner[r.Device] = r.PVPath
	}

	if len(sel.GetPaths()) > 0 {
		var out []host.Disk
		for _, p := range sel.GetPaths() {
			d, err := s.host.DiskByPath(p)
			if errors.Is(err, host.ErrNotDisk) {
				return nil, status.Errorf(codes.NotFound, "device %s is not a whole block device on this node", p)
			}
			if err != nil {
				return nil, status.Errorf(codes.Internal, "reading %s: %v", p, err)
			}
			if pv, ok := owner[d.Path]; ok {
				return nil, status.Errorf(codes.FailedPrecondition, "device %s is already prepared for pv_path %s", p, pv)
			}
			f, err := s.observe(ctx, d, mounts, boot, true)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "probing %s: %v", p, err)
			}
			if why := ineligible(f, s.opts.AllowLoopDevices); why != "" {
				return nil, status.Errorf(codes.FailedPrecondition, "device %s %s", p, why)
			}
			out = append(out, d)
		}
		return out, nil
	}

	disks, err := s.host.Disks()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing devices: %v", err)
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Path < disks[j].Path })
	var out []host.Disk
	for _, d := range disks {
		if _, taken := owner[d.Path]; taken || !matches(d, sel) {
			continue
		}
		f, err := s.observe(ctx, d, mounts, boot, true)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "probing %s: %v", d.Path, err)
		}
		if ineligible(f, s.opts.AllowLoopDevices) != "" {
			continue
		}
		out = append(out, d)
		if len(out) == int(sel.GetCount()) {
			return out, nil
		}
	}
	return nil, status.Errorf(codes.FailedPrecondition, "%d eligible devices match the selector, %d requested", len(out), sel.GetCount())
}

func matches(d host.Disk, sel *nodeagentv1.DeviceSelector) bool {
	switch {
	case sel.GetModel() != "" && d.Model != sel.GetModel():
		return false
	case sel.GetMinSizeBytes() != 0 && d.SizeBytes < sel.GetMinSizeBytes():
		return false
	case sel.GetMaxSizeBytes() != 0 && d.SizeBytes > sel.GetMaxSizeBytes():
		return false
	case sel.GetNvmeOnly() && !d.NVMe():
		return false
	}
	return true
}

// prepareOne brings one reserved device to ready, under its device lock. A ready device only
// has its mounts checked, which makes a repeat a no-op.
func (s *Server) prepareOne(ctx context.Context, dev string) (record, error) {
	unlock := s.lockDevice(dev)
	defer unlock()
	r, ok := s.lookup(dev) // re-read: another request may have finished or released it
	if !ok {
		return record{}, status.Errorf(codes.Aborted, "device %s was released while this request waited", dev)
	}
	if r.Phase == phaseReady {
		if err := s.ensureMounted(ctx, r); err != nil {
			return record{}, err
		}
		return r, nil
	}

	// An interrupted attempt may have left our own mounts behind.
	if err := s.host.Unmount(r.PVPath); err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	if err := s.host.Unmount(r.MountPath); err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	d, err := s.host.DiskByPath(dev)
	if err != nil {
		return record{}, status.Errorf(codes.NotFound, "device %s is gone: %v", dev, err)
	}
	mounts, err := s.host.Mounts()
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "reading mounts: %v", err)
	}
	boot, err := s.host.BootDisks()
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "finding the boot disk: %v", err)
	}
	f, err := s.observe(ctx, d, mounts, boot, true)
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "probing %s: %v", dev, err)
	}
	if why := resumable(f, r); why != "" {
		return record{}, status.Errorf(codes.FailedPrecondition, "device %s %s", dev, why)
	}

	if r.XFSPercent != 0 {
		xfsDev, rawDev, err := s.host.PartitionSplit(ctx, d, r.XFSPercent, r.DiskGUID)
		if err != nil {
			return record{}, status.Errorf(codes.Internal, "partitioning %s: %v", dev, err)
		}
		r.XFSDevice, r.RawDevice = xfsDev, rawDev
		if r.RawSizeBytes, err = s.host.DeviceSize(rawDev); err != nil {
			return record{}, status.Errorf(codes.Internal, "%v", err)
		}
	}
	if r.XFSSizeBytes, err = s.host.DeviceSize(r.XFSDevice); err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	if err := s.host.MkfsXFS(ctx, r.XFSDevice, XFSLabel, r.FSUUID); err != nil {
		return record{}, status.Errorf(codes.Internal, "making XFS on %s: %v", r.XFSDevice, err)
	}
	if err := s.mount(r); err != nil {
		return record{}, err
	}
	r.Phase = phaseReady
	if err := s.update(dev, &r); err != nil {
		return record{}, err
	}
	s.log.Info("Prepared device", "device", dev, "xfsDevice", r.XFSDevice, "pvPath", r.PVPath)
	return r, nil
}

func (s *Server) mount(r record) error {
	if err := s.host.MountXFS(r.XFSDevice, r.MountPath); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if err := s.host.BindMount(r.MountPath, r.PVPath); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

// ensureMounted checks that a ready device still carries its filesystem and that both of its
// mounts are in place, mounting what is missing.
func (s *Server) ensureMounted(ctx context.Context, r record) error {
	sig, err := s.host.Probe(ctx, r.XFSDevice)
	if err != nil {
		return status.Errorf(codes.Internal, "probing %s: %v", r.XFSDevice, err)
	}
	if sig.Type != "xfs" || sig.UUID != r.FSUUID {
		why := fmt.Sprintf("device %s no longer carries the agent's filesystem %s", r.XFSDevice, r.FSUUID)
		s.setMissing(r.Device, why)
		return status.Error(codes.FailedPrecondition, why)
	}
	m, mounted, err := s.host.MountedAt(r.MountPath)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if !mounted {
		if err := s.host.MountXFS(r.XFSDevice, r.MountPath); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
		if m, _, err = s.host.MountedAt(r.MountPath); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
	}
	b, bound, err := s.host.MountedAt(r.PVPath)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if bound && b.MajMin != m.MajMin {
		return status.Errorf(codes.FailedPrecondition, "pv_path %s has another filesystem mounted over it", r.PVPath)
	}
	if !bound {
		if err := s.host.BindMount(r.MountPath, r.PVPath); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
	}
	s.mu.Lock()
	delete(s.missing, r.Device)
	s.mu.Unlock()
	return nil
}

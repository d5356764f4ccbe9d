package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// claimAttempts bounds how often a request selects again after a concurrent request reserved
// a device it had chosen.
const claimAttempts = 3

// PrepareDisks prepares devices for a PV source path; see the proto for the contract.
func (s *Server) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	if err := validatePrepare(req, s.opts.PVRoot); err != nil {
		return nil, err
	}
	if err := s.checkTenant(ctx, req.GetNamespace(), true); err != nil {
		return nil, err
	}
	// Refuse a symlink on the way before any device is touched; the mount resolves again.
	if err := s.host.CheckBeneath(s.opts.PVRoot, req.GetPvPath()); err != nil {
		return nil, hostError(err)
	}
	recs, err := s.claim(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &nodeagentv1.PrepareDisksResponse{}
	for _, r := range recs {
		began := time.Now()
		done, err := s.prepareOne(ctx, r.FSUUID)
		s.opts.Metrics.diskOp("prepare", err)
		if err == nil {
			s.opts.Metrics.prepared(time.Since(began))
		}
		if err != nil {
			return nil, err
		}
		resp.Disks = append(resp.Disks, toProto(done))
	}
	return resp, nil
}

// hostError maps an error of package host to its gRPC status.
func hostError(err error) error {
	switch {
	case errors.Is(err, host.ErrUnsafePath):
		return status.Errorf(codes.InvalidArgument, "%v", err)
	case errors.Is(err, host.ErrMediaChanged):
		return status.Errorf(codes.Aborted, "%v", err)
	case errors.Is(err, host.ErrInUse):
		return status.Errorf(codes.FailedPrecondition, "%v", err)
	}
	return status.Errorf(codes.Internal, "%v", err)
}

// checkTenant refuses a request for another namespace than the one the node lends its disks
// to (its pool label <prefix>/namespace; none or empty: every namespace). PrepareDisks must
// name the namespace (required); ReleaseDisks may omit it (it only erases what the agent made,
// identity-checked) but may not name another.
func (s *Server) checkTenant(ctx context.Context, namespace string, required bool) error {
	labels, err := s.labels.NodeLabels(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "reading the node's labels: %v", err)
	}
	lent := poolOf(labels, s.opts.PoolLabelPrefix).Namespace
	if lent == "" || namespace == lent || (namespace == "" && !required) {
		return nil
	}
	label := s.opts.PoolLabelPrefix + "/namespace"
	if namespace == "" {
		return status.Errorf(codes.PermissionDenied,
			"node %s lends its disks only to namespace %q (label %s); the request names no namespace", s.opts.NodeName, lent, label)
	}
	return status.Errorf(codes.PermissionDenied,
		"node %s lends its disks only to namespace %q (label %s), not to %q", s.opts.NodeName, lent, label, namespace)
}

// stepError maps the failure of a destructive step: a device found in use right before or
// after it is FailedPrecondition, media that changed Aborted, anything else Internal.
func stepError(step string, err error) error {
	switch {
	case errors.Is(err, host.ErrInUse), errors.Is(err, host.ErrDiscardUnsupported):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", step, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.FromContextError(fmt.Errorf("%s: %w", step, err)).Err()
	case errors.Is(err, host.ErrMediaChanged):
		return status.Errorf(codes.Aborted, "%s: %v", step, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", step, err)
}

// claim finds the records a request stands for: those already made for its pv_path (a
// repeat), or new ones reserved in the state before any device is touched. Devices are probed
// without s.mu (a slow disk holds up only its own calls); the reservation re-checks, under
// s.mu, that no concurrent request reserved them meanwhile.
func (s *Server) claim(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) ([]record, error) {
	for range claimAttempts {
		if recs, err := s.existingClaim(req); recs != nil || err != nil {
			return recs, err
		}
		chosen, err := s.selectDevices(ctx, req.GetSelector())
		if err != nil {
			// The same request, racing this one, may have reserved the devices meanwhile.
			if recs, _ := s.existingClaim(req); recs != nil {
				return recs, nil
			}
			return nil, err
		}
		recs, err := s.reserve(req, chosen)
		if recs != nil || err != nil {
			return recs, err
		}
	}
	return nil, status.Errorf(codes.Aborted, "the selected devices were reserved by concurrent requests; retry")
}

// existingClaim returns the records of a repeated request, or refuses a pv_path that overlaps
// another; nil, nil when the request is new.
func (s *Server) existingClaim(req *nodeagentv1.PrepareDisksRequest) ([]record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.existingClaimLocked(req)
}

func (s *Server) existingClaimLocked(req *nodeagentv1.PrepareDisksRequest) ([]record, error) {
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
		if ns := existing[0].Namespace; ns != "" && ns != req.GetNamespace() { // "": an older agent's record
			return nil, status.Errorf(codes.PermissionDenied,
				"pv_path %s is prepared for namespace %q, not %q", req.GetPvPath(), existing[0].Namespace, req.GetNamespace())
		}
		if len(existing) != want || existing[0].XFSPercent != req.GetXfsPercent() || !samePaths(existing, s.canonical(sel.GetPaths())) {
			return nil, status.Errorf(codes.FailedPrecondition,
				"pv_path %s is already prepared with other settings; release it first", req.GetPvPath())
		}
		sort.Slice(existing, func(i, j int) bool { return existing[i].PVPath < existing[j].PVPath })
		return existing, nil
	}
	for _, r := range s.records {
		if r.PVPath == req.GetPvPath() || isUnder(req.GetPvPath(), r.PVPath) || isUnder(r.PVPath, req.GetPvPath()) {
			return nil, status.Errorf(codes.FailedPrecondition, "pv_path %s overlaps pv_path %s of device %s", req.GetPvPath(), r.PVPath, r.Device)
		}
	}
	return nil, nil
}

// reserve records the chosen devices for the request, with the identity the agent is about to
// write (filesystem UUID, disk GUID) and the one the device already has (WWN, serial, and its
// media's sequence number in this boot). It returns nil, nil when a concurrent request
// reserved one of them first, so the caller selects again.
func (s *Server) reserve(req *nodeagentv1.PrepareDisksRequest, chosen []host.Disk) ([]record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if recs, err := s.existingClaimLocked(req); recs != nil || err != nil {
		return recs, err
	}
	for _, d := range chosen {
		for _, r := range s.records {
			if sameHardware(r, d) || sameMedia(r, d, s.bootID) {
				if len(req.GetSelector().GetPaths()) > 0 {
					return nil, status.Errorf(codes.FailedPrecondition, "device %s is already prepared for pv_path %s", d.Path, r.PVPath)
				}
				return nil, nil
			}
		}
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
			Device: d.Path, XFSPercent: req.GetXfsPercent(),
			FSUUID: newUUID(), WWN: d.WWN, Serial: d.Serial, BootID: s.bootID, DiskSeq: d.DiskSeq,
			Claim: req.GetPvPath(), PVPath: req.GetPvPath(), Phase: phasePreparing, Namespace: req.GetNamespace(),
		}
		if r.XFSPercent != 0 {
			r.DiskGUID = newUUID()
		}
		r.XFSDevice, r.RawDevice = devicesOf(r, d)
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
	sort.Slice(recs, func(i, j int) bool { return recs[i].PVPath < recs[j].PVPath })
	for _, r := range recs {
		s.log.Info("Reserved device", "device", r.Device, "fsUUID", r.FSUUID, "pvPath", r.PVPath, "xfsPercent", r.XFSPercent)
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

// canonical maps device paths (possibly /dev/disk/by-id links) to kernel names, so a repeat
// through a link is recognised; unknown paths stay as given.
func (s *Server) canonical(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if d, ok := s.diskAt(p); ok {
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

// deviceNotFound maps a failed DiskByPath to its status.
func deviceNotFound(p string, err error) error {
	switch {
	case errors.Is(err, host.ErrNotDisk):
		return status.Errorf(codes.NotFound, "device %s is not a whole block device on this node", p)
	}
	return status.Errorf(codes.Internal, "reading %s: %v", p, err)
}

// selectDevices resolves a selector to eligible disks that no record holds. Each disk is
// probed under its own device lock only.
func (s *Server) selectDevices(ctx context.Context, sel *nodeagentv1.DeviceSelector) ([]host.Disk, error) {
	mounts, boot, err := s.mountTables()
	if err != nil {
		return nil, err
	}
	recs := s.snapshot()

	if len(sel.GetPaths()) > 0 {
		var out []host.Disk
		for _, p := range sel.GetPaths() {
			d, err := s.host.DiskByPath(p)
			if err != nil {
				return nil, deviceNotFound(p, err)
			}
			f, ok, err := s.observe(ctx, d.Path, mounts, boot)
			if err != nil {
				return nil, probeError(p, err)
			}
			if !ok {
				return nil, status.Errorf(codes.NotFound, "device %s went away", p)
			}
			if r, held := heldBy(f, recs, s.bootID); held {
				return nil, status.Errorf(codes.FailedPrecondition, "device %s is already prepared for pv_path %s", p, r.PVPath)
			}
			if why := ineligible(f, s.opts.AllowLoopDevices); why != "" {
				return nil, status.Errorf(codes.FailedPrecondition, "device %s %s", p, why)
			}
			out = append(out, f.disk)
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
		if !matches(d, sel) || kindIneligible(d.Kind, s.opts.AllowLoopDevices) != "" || boot[d.Name] || d.OfferedBy == "" {
			continue
		}
		f, ok, err := s.observe(ctx, d.Path, mounts, boot)
		if err != nil {
			return nil, probeError(d.Path, err)
		}
		if _, held := heldBy(f, recs, s.bootID); !ok || held || !matches(f.disk, sel) || ineligible(f, s.opts.AllowLoopDevices) != "" {
			continue
		}
		out = append(out, f.disk)
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

// prepareOne brings one reserved record to ready, on the device that identifies it, under the
// record's and the device's locks. A ready record only has its mounts checked, which makes a
// repeat a no-op.
func (s *Server) prepareOne(ctx context.Context, key string) (record, error) {
	unlock, err := s.lockRecord(ctx, key)
	if err != nil {
		return record{}, err
	}
	defer unlock()
	r, ok := s.lookup(key) // re-read: another request may have finished or released it
	if !ok {
		return record{}, status.Errorf(codes.Aborted, "the device for pv_path was released while this request waited")
	}
	if r.Phase == phasePreparing {
		// An interrupted attempt may have left the agent's own mounts behind.
		if err := s.host.Unmount(s.opts.PVRoot, r.PVPath); err != nil {
			return record{}, hostError(err)
		}
		if err := s.host.Unmount(s.opts.AgentRoot, r.MountPath); err != nil {
			return record{}, hostError(err)
		}
	}
	l, err := s.locate(ctx, r)
	if err != nil {
		return record{}, err
	}
	if l == nil {
		if r.Phase == phaseReady {
			return record{}, s.notOnNode(r)
		}
		return record{}, status.Errorf(codes.FailedPrecondition,
			"device %s no longer carries what the agent wrote there, and no device on this node is the one reserved for pv_path %s; release it and prepare again",
			r.Device, r.PVPath)
	}
	defer l.unlock()
	if r.Phase == phaseReady {
		return s.ensureMounted(ctx, r, l.facts)
	}
	d := l.facts.disk
	if why := resumable(l.facts, r); why != "" {
		return record{}, status.Errorf(codes.FailedPrecondition, "device %s %s", d.Path, why)
	}

	r.Device = d.Path
	r.XFSDevice, r.RawDevice = devicesOf(r, d)
	if r.WWN == "" && r.Serial == "" {
		r.WWN, r.Serial = d.WWN, d.Serial
	}
	if r.XFSPercent != 0 {
		if _, _, err := s.host.PartitionSplit(ctx, d, r.XFSPercent, r.DiskGUID); err != nil {
			return record{}, stepError("partitioning "+d.Path, err)
		}
		if r.RawSizeBytes, err = s.host.DeviceSize(r.RawDevice); err != nil {
			return record{}, status.Errorf(codes.Internal, "%v", err)
		}
		if r.RawPartUUID, err = s.host.PartitionUUID(ctx, d.Path, 2); err != nil {
			return record{}, status.Errorf(codes.Internal, "reading the raw partition's GUID: %v", err)
		}
	}
	if r.XFSSizeBytes, err = s.host.DeviceSize(r.XFSDevice); err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	if err := s.host.MkfsXFS(ctx, d, r.XFSDevice, XFSLabel, r.FSUUID); err != nil {
		return record{}, stepError("making XFS on "+r.XFSDevice, err)
	}
	if err := s.host.MountXFS(d, r.XFSDevice, s.opts.AgentRoot, r.MountPath); err != nil {
		return record{}, hostError(err)
	}
	if err := s.host.BindMount(r.MountPath, s.opts.PVRoot, r.PVPath); err != nil {
		return record{}, hostError(err)
	}
	r.Phase = phaseReady
	if err := s.update(key, &r); err != nil {
		return record{}, err
	}
	s.log.Info("Prepared device", "device", d.Path, "xfsDevice", r.XFSDevice, "fsUUID", r.FSUUID, "pvPath", r.PVPath)
	return r, nil
}

// ensureMounted checks that a ready record's device, observed under its lock, still carries
// its filesystem and that both of its mounts are in place, mounting what is missing.
func (s *Server) ensureMounted(ctx context.Context, r record, f facts) (record, error) {
	d := f.disk
	xfsDev, _ := devicesOf(r, d)
	sig, majmin, found := f.sig, d.MajMin, xfsDev == d.Path
	for _, p := range d.Partitions {
		if p.Path == xfsDev {
			sig, majmin, found = f.partSigs[p.Path], p.MajMin, true
		}
	}
	if !found && r.DiskGUID != "" && strings.EqualFold(f.sig.PTUUID, r.DiskGUID) {
		// The agent's table is there but the kernel did not parse it (no GPT support built in).
		if err := s.host.RegisterSplit(ctx, d); err != nil {
			return record{}, hostError(err)
		}
		var ok bool
		if d, ok = s.diskAt(d.Path); !ok {
			return record{}, status.Errorf(codes.Aborted, "device %s went away", d.Path)
		}
		for _, p := range d.Partitions {
			if p.Path == xfsDev {
				var err error
				if sig, err = s.host.Probe(ctx, xfsDev); err != nil {
					return record{}, probeError(xfsDev, err)
				}
				majmin, found = p.MajMin, true
			}
		}
	}
	if !found || sig.Type != "xfs" || sig.UUID != r.FSUUID {
		why := fmt.Sprintf("device %s no longer carries the agent's filesystem %s", xfsDev, r.FSUUID)
		s.setMissing(r.FSUUID, why)
		return record{}, status.Error(codes.FailedPrecondition, why)
	}
	r, err := s.updateHints(r.FSUUID, d)
	if err != nil {
		return record{}, err
	}
	if r.XFSPercent != 0 && r.RawPartUUID == "" {
		// Split before the agent kept the raw partition's GUID: read it back and keep it.
		id, err := s.host.PartitionUUID(ctx, d.Path, 2)
		if err != nil {
			return record{}, status.Errorf(codes.Internal, "reading the raw partition's GUID: %v", err)
		}
		if r, err = s.setRawPartUUID(r.FSUUID, id); err != nil {
			return record{}, err
		}
	}
	m, mounted, err := s.host.MountedAt(r.MountPath)
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	if mounted && m.MajMin != majmin {
		return record{}, status.Errorf(codes.FailedPrecondition, "mount path %s has another filesystem (%s) mounted over it", r.MountPath, m.MajMin)
	}
	if !mounted {
		if err := s.host.MountXFS(d, xfsDev, s.opts.AgentRoot, r.MountPath); err != nil {
			return record{}, hostError(err)
		}
	}
	b, bound, err := s.host.MountedAt(r.PVPath)
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "%v", err)
	}
	if bound && b.MajMin != majmin {
		return record{}, status.Errorf(codes.FailedPrecondition, "pv_path %s has another filesystem mounted over it", r.PVPath)
	}
	if !bound {
		if err := s.host.BindMount(r.MountPath, s.opts.PVRoot, r.PVPath); err != nil {
			return record{}, hostError(err)
		}
	}
	s.mu.Lock()
	delete(s.missing, r.FSUUID)
	s.mu.Unlock()
	return r, nil
}

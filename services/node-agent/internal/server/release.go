package server

import (
	"context"
	"errors"
	"slices"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReleaseDisks unmounts and forgets prepared devices; a device the agent does not remember is
// already released, so a repeat succeeds and releases nothing. Devices are named as the agent
// last reported them, or by any path of a device that carries a record's identity.
func (s *Server) ReleaseDisks(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	if err := validateRelease(req, s.opts.PVRoot); err != nil {
		return nil, err
	}
	if err := s.checkTenant(ctx, req.GetNamespace(), false); err != nil {
		return nil, err
	}
	keys, err := s.releaseKeys(ctx, req)
	if err != nil {
		return nil, err
	}
	if ns := req.GetNamespace(); ns != "" {
		for _, key := range keys {
			if r, ok := s.lookup(key); ok && r.Namespace != "" && r.Namespace != ns {
				return nil, status.Errorf(codes.PermissionDenied,
					"device %s (pv_path %s) was prepared for namespace %q, not %q: nothing was released", r.Device, r.PVPath, r.Namespace, ns)
			}
		}
	}
	resp := &nodeagentv1.ReleaseDisksResponse{}
	for _, key := range keys {
		r, released, err := s.releaseOne(ctx, key, req.GetWipe(), wipeMethod(req.GetWipeMethod()))
		if err != nil || released {
			s.opts.Metrics.diskOp("release", err)
		}
		if err != nil {
			return nil, err
		}
		if released {
			resp.Released = append(resp.Released, toProto(r))
		}
	}
	return resp, nil
}

// releaseKeys finds the records a release names: by pv_path, or by device, through the name
// the agent last reported or the identity the named device carries.
func (s *Server) releaseKeys(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) ([]string, error) {
	recs := s.snapshot()
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if req.GetPvPath() != "" {
		for _, r := range recs {
			if r.Claim == req.GetPvPath() {
				add(r.FSUUID)
			}
		}
		return keys, nil
	}
	mounts, boot, err := s.mountTables()
	if err != nil {
		return nil, err
	}
	for _, p := range req.GetDevices() {
		d, err := s.host.DiskByPath(p)
		name, carried := p, false
		if err == nil {
			name = d.Path
			f, ok, err := s.observe(ctx, d.Path, mounts, boot)
			if err != nil {
				return nil, probeError(p, err)
			}
			for _, r := range recs {
				if ok && identify(r, f, s.bootID) != matchNone {
					add(r.FSUUID)
					carried = true
				}
			}
		}
		if carried {
			continue // the device there is a record's: the name means that one, not an old hint
		}
		for _, r := range recs {
			if r.Device == name {
				add(r.FSUUID)
			}
		}
	}
	return keys, nil
}

// releaseOne unmounts and forgets a record. Its device is found by identity; a wipe writes
// only after that identity is verified again under the device lock, and a record whose device
// is not on the node is never wiped: the agent refuses and says so.
func (s *Server) releaseOne(ctx context.Context, key string, wipe bool, method host.WipeMethod) (record, bool, error) {
	unlock, err := s.lockRecord(ctx, key)
	if err != nil {
		return record{}, false, err
	}
	defer unlock()
	r, ok := s.lookup(key)
	if !ok {
		return record{}, false, nil
	}
	l, err := s.locate(ctx, r)
	if err != nil {
		return record{}, false, err
	}
	if l == nil {
		if wipe {
			return record{}, false, status.Errorf(codes.FailedPrecondition,
				"no device on this node carries the agent's filesystem %s of pv_path %s (last seen at %s): nothing was wiped; release without wipe to forget it",
				r.FSUUID, r.PVPath, r.Device)
		}
		if err := s.unmountAll(r); err != nil {
			return record{}, false, err
		}
		if err := s.update(key, nil); err != nil {
			return record{}, false, err
		}
		s.log.Info("Released device not found on the node", "lastDevice", r.Device, "fsUUID", r.FSUUID, "pvPath", r.PVPath)
		return r, true, nil
	}
	defer l.unlock()
	d := l.facts.disk
	r.Device = d.Path
	r.XFSDevice, r.RawDevice = devicesOf(r, d)
	if err := s.unmountAll(r); err != nil {
		return record{}, false, err
	}
	// Bind mounts made from ours (a pod's volume) keep the filesystem alive after our unmount;
	// forgetting or wiping it then would pull it from under a running workload.
	for _, dev := range []string{r.XFSDevice, d.Path} {
		if err := s.host.CheckExclusive(dev); errors.Is(err, host.ErrBusy) {
			if r.Phase == phaseReady {
				_, _ = s.ensureMounted(ctx, r, l.facts) // put our mounts back; the error is the busy device
			}
			return record{}, false, status.Errorf(codes.FailedPrecondition,
				"device %s is still in use after unmounting pv_path %s; stop its users first", d.Path, r.PVPath)
		}
	}
	if wipe {
		// The same rule as before preparing, for the whole disk and the raw partition too: a
		// pod that maps the raw partition, a process holding it open, swap or a loop device on
		// it. host.Wipe checks again right before and after writing.
		if err := s.host.CheckFree(ctx, d); err != nil {
			if r.Phase == phaseReady {
				_, _ = s.ensureMounted(ctx, r, l.facts) // put our mounts back; the error is the user
			}
			return record{}, false, stepError("wiping "+d.Path, err)
		}
	}
	if err := s.host.RemoveDir(r.MountPath); err != nil {
		s.log.Warn("Removing mount directory failed", "path", r.MountPath, "err", err)
	}
	if wipe {
		if err := s.wipe(ctx, r, d, method); err != nil {
			return record{}, false, err
		}
	}
	if err := s.update(key, nil); err != nil {
		return record{}, false, err
	}
	s.log.Info("Released device", "device", d.Path, "fsUUID", r.FSUUID, "pvPath", r.PVPath, "wiped", wipe)
	return r, true, nil
}

// wipe verifies r's identity on the disk once more, under the device lock the caller holds and
// immediately before writing, and wipes it; host.Wipe checks that the media is still the one
// observed here.
func (s *Server) wipe(ctx context.Context, r record, was host.Disk, method host.WipeMethod) error {
	d, ok := s.diskAt(was.Path)
	if !ok || d.DiskSeq != was.DiskSeq {
		return status.Errorf(codes.Aborted, "device %s changed while it was being released: nothing was wiped", was.Path)
	}
	mounts, boot, err := s.mountTables()
	if err != nil {
		return err
	}
	f, err := s.observeLocked(ctx, d, mounts, boot)
	if err != nil {
		return probeError(d.Path, err)
	}
	if identify(r, f, s.bootID) == matchNone {
		return status.Errorf(codes.FailedPrecondition,
			"device %s no longer carries the agent's filesystem %s: nothing was wiped", d.Path, r.FSUUID)
	}
	var parts []string
	if r.XFSPercent != 0 {
		parts = partPaths(d)
	}
	if err := s.host.Wipe(ctx, d, parts, method); err != nil {
		return stepError("wiping "+d.Path, err)
	}
	return nil
}

// wipeMethod maps the proto's wipe method; unspecified means signatures.
func wipeMethod(m nodeagentv1.WipeMethod) host.WipeMethod {
	switch m {
	case nodeagentv1.WipeMethod_WIPE_METHOD_DISCARD:
		return host.WipeDiscard
	case nodeagentv1.WipeMethod_WIPE_METHOD_ZERO:
		return host.WipeZero
	}
	return host.WipeSignatures
}

// unmountAll removes the agent's two mounts of a record, the PV path first.
func (s *Server) unmountAll(r record) error {
	if err := s.host.Unmount(s.opts.PVRoot, r.PVPath); err != nil {
		return hostError(err)
	}
	if err := s.host.Unmount(s.opts.AgentRoot, r.MountPath); err != nil {
		return hostError(err)
	}
	return nil
}

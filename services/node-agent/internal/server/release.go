package server

import (
	"context"
	"errors"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReleaseDisks unmounts and forgets prepared devices; a device the agent does not remember is
// already released, so a repeat succeeds and releases nothing.
func (s *Server) ReleaseDisks(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	if err := validateRelease(req, s.opts.PVRoot); err != nil {
		return nil, err
	}
	var devices []string
	wanted := s.canonical(req.GetDevices())
	for _, r := range s.snapshot() {
		if r.Claim == req.GetPvPath() || containsString(wanted, r.Device) {
			devices = append(devices, r.Device)
		}
	}
	resp := &nodeagentv1.ReleaseDisksResponse{}
	for _, dev := range devices {
		r, released, err := s.releaseOne(ctx, dev, req.GetWipe())
		if err != nil {
			return nil, err
		}
		if released {
			resp.Released = append(resp.Released, toProto(r))
		}
	}
	return resp, nil
}

func (s *Server) releaseOne(ctx context.Context, dev string, wipe bool) (record, bool, error) {
	unlock := s.lockDevice(dev)
	defer unlock()
	r, ok := s.lookup(dev)
	if !ok {
		return record{}, false, nil
	}
	if err := s.host.Unmount(r.PVPath); err != nil {
		return record{}, false, status.Errorf(codes.Internal, "%v", err)
	}
	if err := s.host.Unmount(r.MountPath); err != nil {
		return record{}, false, status.Errorf(codes.Internal, "%v", err)
	}
	// Bind mounts made from ours (a pod's volume) keep the filesystem alive after our unmount;
	// forgetting or wiping it then would pull it from under a running workload.
	for _, d := range []string{r.XFSDevice, r.Device} {
		if err := s.host.CheckExclusive(d); errors.Is(err, host.ErrBusy) {
			if r.Phase == phaseReady {
				_ = s.ensureMounted(ctx, r) // put our mounts back; the error is the busy device
			}
			return record{}, false, status.Errorf(codes.FailedPrecondition,
				"device %s is still in use after unmounting pv_path %s; stop its users first", dev, r.PVPath)
		}
	}
	if err := s.host.RemoveDir(r.MountPath); err != nil {
		s.log.Warn("Removing mount directory failed", "path", r.MountPath, "err", err)
	}
	if wipe {
		var parts []string
		if r.RawDevice != "" {
			parts = []string{r.XFSDevice, r.RawDevice}
		}
		if err := s.host.Wipe(ctx, r.Device, parts); err != nil {
			return record{}, false, status.Errorf(codes.Internal, "wiping %s: %v", dev, err)
		}
	}
	if err := s.update(dev, nil); err != nil {
		return record{}, false, err
	}
	s.log.Info("Released device", "device", dev, "pvPath", r.PVPath, "wiped", wipe)
	return r, true, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package server

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetNodeReport describes the node.
func (s *Server) GetNodeReport(ctx context.Context, _ *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	resp := &nodeagentv1.GetNodeReportResponse{
		NodeName:     s.opts.NodeName,
		AgentVersion: s.opts.Version,
	}

	labels, err := s.labels.NodeLabels(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reading the node's labels: %v", err)
	}
	resp.Pool = poolOf(labels, s.opts.PoolLabelPrefix)

	cpu, mem := s.host.Capacity()
	resp.Capacity = &nodeagentv1.NodeCapacity{CpuMillis: cpu, MemoryBytes: mem}

	disks, err := s.host.Disks()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing devices: %v", err)
	}
	mounts, boot, err := s.mountTables()
	if err != nil {
		return nil, err
	}
	recs := s.snapshot()
	// Probing runs blkid per device and partition; a node with many NVMe drives would wait for
	// each in turn, so devices are probed side by side, each under its own device lock.
	observed := make([]facts, len(disks))
	present := make([]bool, len(disks))
	errs := make([]error, len(disks))
	// A hung disk must not cost the report: each observation stops a little before the
	// call's deadline, and a disk that failed or ran out is reported with its error.
	octx, cancel := observeContext(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, d := range disks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			observed[i], present[i], errs[i] = s.observe(octx, d.Path, mounts, boot)
		}()
	}
	wg.Wait()
	found := map[string]host.Disk{} // FSUUID -> the disk that identifies it now
	incomplete := false
	for i, d := range disks {
		if errs[i] != nil {
			incomplete = true
			why := status.Convert(probeError(d.Path, errs[i])).Message()
			resp.Devices = append(resp.Devices, &nodeagentv1.BlockDevice{
				Path: d.Path, SizeBytes: d.SizeBytes, Model: d.Model, Serial: d.Serial,
				Rotational: d.Rotational, Nvme: d.NVMe(), BootDisk: boot[d.Name], OfferedBy: d.OfferedBy,
				Error: why, IneligibleReason: "could not be observed by the agent: " + why,
			})
			continue
		}
		if !present[i] {
			continue // went away since it was listed
		}
		f := observed[i]
		d = f.disk
		bd := &nodeagentv1.BlockDevice{
			Path: d.Path, SizeBytes: d.SizeBytes, Model: d.Model, Serial: d.Serial,
			Rotational: d.Rotational, Nvme: d.NVMe(), BootDisk: f.boot,
			Filesystem: f.sig.Type, Label: f.sig.Label, PartitionTable: f.sig.PTType,
			Mountpoints: f.mountpoints[d.Path], OfferedBy: d.OfferedBy,
		}
		for _, p := range d.Partitions {
			ps := f.partSigs[p.Path]
			bd.Partitions = append(bd.Partitions, &nodeagentv1.Partition{
				Path: p.Path, SizeBytes: p.SizeBytes, Filesystem: ps.Type, Label: ps.Label,
				Mountpoints: f.mountpoints[p.Path],
			})
		}
		if r, held := heldBy(f, recs, s.bootID); held {
			bd.OwnedByAgent = true
			bd.IneligibleReason = "is prepared by the agent"
			if identify(r, f, s.bootID) != matchNone {
				found[r.FSUUID] = d
			}
		} else {
			bd.IneligibleReason = ineligible(f, s.opts.AllowLoopDevices)
			bd.Eligible = bd.IneligibleReason == ""
		}
		resp.Devices = append(resp.Devices, bd)
	}
	names := make([]string, 0, len(s.opts.SysctlMinimums))
	for n := range s.opts.SysctlMinimums {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v, err := s.host.ReadSysctl(n)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		min := s.opts.SysctlMinimums[n]
		resp.Sysctls = append(resp.Sysctls, &nodeagentv1.SysctlStatus{Name: n, Value: v, Minimum: min, Met: v >= min})
	}

	resp.Prepared = s.preparedList(found, incomplete)
	return resp, nil
}

// observeContext bounds the observation of the report's disks: a tenth of the time left
// before the call's deadline (at least 100ms) is kept to answer with what was observed;
// without a deadline, 30s.
func observeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithTimeout(ctx, 30*time.Second)
	}
	reserve := max(time.Until(deadline)/10, 100*time.Millisecond)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// preparedList reports every record under the name its device has now; a ready record that no
// device on the node identifies, or whose filesystem is not in place, is reported missing.
// When some disk could not be observed (incomplete), a record not found keeps its state: it
// may be on that disk.
func (s *Server) preparedList(found map[string]host.Disk, incomplete bool) []*nodeagentv1.PreparedDisk {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*nodeagentv1.PreparedDisk
	learned := false
	for i, r := range s.records {
		d, ok := found[r.FSUUID]
		if ok {
			r.Device = d.Path
			r.XFSDevice, r.RawDevice = devicesOf(r, d)
			if r.XFSPercent != 0 && r.RawPartUUID == "" && r.Phase == phaseReady {
				// Split before the agent kept the partition's GUID: read it from the table
				// and keep it.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if id, err := s.host.PartitionUUID(ctx, d.Path, 2); err == nil {
					r.RawPartUUID, s.records[i].RawPartUUID = id, id
					learned = true
				}
				cancel()
			}
		}
		pd := toProto(r)
		if _, gone := s.missing[r.FSUUID]; gone || (!ok && !incomplete && r.Phase == phaseReady) {
			pd.State = phaseMissing
		}
		out = append(out, pd)
	}
	if learned {
		if err := s.saveLocked(); err != nil {
			s.log.Warn("Failed to save the raw partitions' GUIDs read back", "err", err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PvPath < out[j].PvPath })
	return out
}

func poolOf(labels map[string]string, prefix string) *nodeagentv1.NodePool {
	p := &nodeagentv1.NodePool{LabelPrefix: prefix, Labels: map[string]string{}}
	for k, v := range labels {
		if rest, ok := strings.CutPrefix(k, prefix+"/"); ok {
			p.Labels[k] = v
			switch rest {
			case "namespace":
				p.Namespace = v
			case "type":
				p.Type = v
			}
		}
	}
	return p
}

func toProto(r record) *nodeagentv1.PreparedDisk {
	return &nodeagentv1.PreparedDisk{
		Device: r.Device, XfsDevice: r.XFSDevice, RawDevice: r.RawDevice, XfsPercent: r.XFSPercent,
		FilesystemUuid: r.FSUUID, MountPath: r.MountPath, PvPath: r.PVPath,
		XfsSizeBytes: r.XFSSizeBytes, RawSizeBytes: r.RawSizeBytes, State: r.Phase,
		DiskGuid: r.DiskGUID, Wwn: r.WWN, Serial: r.Serial, RawPartitionUuid: r.RawPartUUID,
	}
}

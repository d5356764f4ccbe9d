package server

import (
	"context"
	"sort"
	"strings"
	"sync"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
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
	mounts, err := s.host.Mounts()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading mounts: %v", err)
	}
	boot, err := s.host.BootDisks()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "finding the boot disk: %v", err)
	}
	owned := map[string]bool{}
	for _, r := range s.snapshot() {
		owned[r.Device] = true
	}
	// Probing runs blkid per device and partition; a node with many NVMe drives would wait for
	// each in turn, so devices are probed side by side.
	observed := make([]facts, len(disks))
	errs := make([]error, len(disks))
	var wg sync.WaitGroup
	for i, d := range disks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			observed[i], errs[i] = s.observe(ctx, d, mounts, boot, true)
		}()
	}
	wg.Wait()
	for i, d := range disks {
		if errs[i] != nil {
			return nil, status.Errorf(codes.Internal, "probing %s: %v", d.Path, errs[i])
		}
		f := observed[i]
		bd := &nodeagentv1.BlockDevice{
			Path: d.Path, SizeBytes: d.SizeBytes, Model: d.Model, Serial: d.Serial,
			Rotational: d.Rotational, Nvme: d.NVMe(), BootDisk: f.boot,
			Filesystem: f.sig.Type, Label: f.sig.Label, PartitionTable: f.sig.PTType,
			Mountpoints: f.mountpoints[d.Path], OwnedByAgent: owned[d.Path],
		}
		for _, p := range d.Partitions {
			ps := f.partSigs[p.Path]
			bd.Partitions = append(bd.Partitions, &nodeagentv1.Partition{
				Path: p.Path, SizeBytes: p.SizeBytes, Filesystem: ps.Type, Label: ps.Label,
				Mountpoints: f.mountpoints[p.Path],
			})
		}
		if !bd.OwnedByAgent {
			bd.IneligibleReason = ineligible(f, s.opts.AllowLoopDevices)
			bd.Eligible = bd.IneligibleReason == ""
		} else {
			bd.IneligibleReason = "is prepared by the agent"
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

	resp.Prepared = s.preparedList()
	return resp, nil
}

func (s *Server) preparedList() []*nodeagentv1.PreparedDisk {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*nodeagentv1.PreparedDisk
	for _, r := range s.records {
		pd := toProto(r)
		if _, gone := s.missing[r.Device]; gone {
			pd.State = phaseMissing
		}
		out = append(out, pd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
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
	}
}

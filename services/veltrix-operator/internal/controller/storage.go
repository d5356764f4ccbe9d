package controller

import (
	"context"
	"fmt"
	"sort"

	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// storageClass creates the class when it is missing. A class of that name made by someone
// else is used as it is: it is cluster-wide, shared by every VeltrixCluster, and its
// provisioner and binding mode cannot change.
func (p *pass) storageClass(ctx context.Context) error {
	want := resources.StorageClass(p.c)
	var live storagev1.StorageClass
	err := p.ctl.client.Get(ctx, client.ObjectKeyFromObject(want), &live)
	switch {
	case apierrors.IsNotFound(err):
		return p.ctl.apply.Apply(ctx, want)
	case err != nil:
		return fmt.Errorf("reading StorageClass %s: %w", want.Name, err)
	}
	return nil
}

// prepareDisks asks the agents of the candidate nodes, used nodes first, for the disks and
// vm.max_map_count, until enough nodes are usable for the members.
func (p *pass) prepareDisks(ctx context.Context) error {
	var nodes corev1.NodeList
	wanted := int(max(p.c.Spec.Size, p.c.Spec.ReplicationFactor))
	if err := p.ctl.client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	prefix := p.ctl.cfg.PoolLabelPrefix
	// Lost nodes are neither prepared nor kept: their volumes go with the replacement, and
	// a lost node that comes back has its disks offered again only by hand.
	lost := p.excludedNodes()
	var order []string
	for _, n := range disks.Order(p.c, nodes.Items, disks.Candidates(p.c, nodes.Items, prefix), disks.KeepUsed(p.c, nodes.Items, prefix, p.c.Status.Nodes)) {
		if !contains(lost, n) {
			order = append(order, n)
		}
	}
	res := disks.Prepare(ctx, p.ctl.cfg.Agents, p.c, order, p.ctl.cfg.PVRoot, wanted)
	var lookupErr error
	disks.RefuseVolumesElsewhere(&res, func(d resources.Disk) string {
		var live corev1.PersistentVolume
		err := p.ctl.client.Get(ctx, client.ObjectKey{Name: resources.DataVolumeName(d)}, &live)
		if err != nil && !apierrors.IsNotFound(err) {
			lookupErr = err
		}
		return resources.VolumeNode(&live)
	})
	if lookupErr != nil {
		return fmt.Errorf("reading PersistentVolumes: %w", lookupErr)
	}
	p.prepared = &res
	var used []string
	for _, n := range res.Usable(p.c.Spec.IndexMapFallback) {
		used = append(used, n.Node)
	}
	// Nodes used before keep their place while their agent is away (not asked this pass, or
	// unreachable): their volumes hold data.
	for _, n := range p.c.Status.Nodes {
		if !contains(used, n) && !contains(lost, n) && p.problemOf(n) == disks.ProblemUnreachable {
			used = append(used, n)
		}
	}
	sort.Strings(used)
	p.c.Status.Nodes = used
	return nil
}

// problemOf is the problem of a node this pass; a node not asked counts as unreachable.
func (p *pass) problemOf(node string) disks.Problem {
	for _, n := range p.prepared.Nodes {
		if n.Node == node {
			return n.Problem
		}
	}
	return disks.ProblemUnreachable
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// persistentVolumes writes a local PersistentVolume for every prepared disk of a usable
// node. They are cluster-scoped, so they carry the cluster's labels instead of an owner
// reference, and they are never pruned here: only the finalizer, for reclaim policy Delete,
// removes them.
func (p *pass) persistentVolumes(ctx context.Context) error {
	var all []resources.Disk
	for _, n := range p.prepared.Usable(p.c.Spec.IndexMapFallback) {
		all = append(all, n.Disks...)
	}
	rawDevice := map[string]string{} // Block volume name -> its partition's kernel name now
	for _, d := range all {
		rawDevice[resources.VLogVolumeName(d)] = d.RawDevice
	}
	for _, want := range resources.PersistentVolumes(p.c, all) {
		var live corev1.PersistentVolume
		err := p.ctl.client.Get(ctx, client.ObjectKeyFromObject(want), &live)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading PersistentVolume %s: %w", want.Name, err)
		case live.Labels[resources.LabelCluster] != p.c.Name || live.Labels[resources.LabelNamespace] != p.c.Namespace:
			return fmt.Errorf("PersistentVolume %s belongs to another cluster", want.Name)
		case children.UpToDate(want, &live):
			continue
		case live.Spec.Local != nil && want.Spec.Local != nil && live.Spec.Local.Path != want.Spec.Local.Path:
			// A volume's path cannot change. New Block volumes name the raw partition by its
			// GUID; one created by kernel name (before the agent reported the GUID) is
			// fine while that name is still the partition's, and reported once a reboot
			// gave the partition another name, instead of failing every pass.
			if now := rawDevice[live.Name]; live.Spec.Local.Path != now {
				p.movedVolumes = append(p.movedVolumes, fmt.Sprintf("%s (%s, now %s)", live.Name, live.Spec.Local.Path, now))
			}
			continue
		}
		if err := p.ctl.apply.Apply(ctx, want); err != nil {
			return err
		}
	}
	return nil
}

package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestDisksBecomeVolumes: the real agents of two nodes prepare a loop device each (split
// 40/60 for the raw VLog), the operator makes the local PersistentVolumes from their
// answers, by identity, and every other child; the third node has no agent, which the
// conditions and a Warning event name, without a hot loop. Deleting the cluster with reclaim
// policy Delete removes the volumes and releases the disks through the agents.
func TestDisksBecomeVolumes(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "operator", true), 1<<30, []string{"node-a", "node-b"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	startController(t, f, ns)
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 40}
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
	})

	cond := condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, "AgentUnreachable")
	if !strings.Contains(cond.Message, "2 of 3 nodes usable") || !strings.Contains(cond.Message, "node-c: AgentUnreachable") {
		t.Errorf("DisksPrepared message %q does not name the unreachable node", cond.Message)
	}
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonDisksNotPrepared)
	condition(t, c, veltrixv1.ConditionMetricsMonitored, metav1.ConditionFalse, veltrixv1.ReasonServiceMonitorCRDMissing)
	// A missing ServiceMonitor CRD is said, not failed: a Warning event besides the condition.
	testenv.Eventually(t, 10*time.Second, "a CRDMissing Warning event", func() (bool, string) {
		ev := eventReasons(t, c)
		return ev[veltrixv1.ReasonServiceMonitorCRDMissing] == corev1.EventTypeWarning, fmt.Sprint(ev)
	})
	low := f.maxMapCount(t, "node-a") < 262144
	if low {
		mm := condition(t, c, veltrixv1.ConditionMaxMapCountLow, metav1.ConditionTrue, veltrixv1.ReasonIndexMapFallback)
		if !strings.Contains(mm.Message, "node-a, node-b") {
			t.Errorf("MaxMapCountLow message %q does not name the nodes", mm.Message)
		}
	} else {
		condition(t, c, veltrixv1.ConditionMaxMapCountLow, metav1.ConditionFalse, veltrixv1.ReasonMaxMapCountMet)
	}

	// Volumes: one Filesystem volume on the XFS partition and one Block volume on the raw
	// partition per node, named and annotated by the identity the agent reports.
	var pvs corev1.PersistentVolumeList
	if err := env.Client.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 4 {
		t.Fatalf("%d PersistentVolumes, want 4 (data and vlog on two nodes)", len(pvs.Items))
	}
	byName := map[string]corev1.PersistentVolume{}
	for _, pv := range pvs.Items {
		byName[pv.Name] = pv
	}
	for _, node := range []string{"node-a", "node-b"} {
		prepared := f.prepared(t, node)
		if len(prepared) != 1 {
			t.Fatalf("%s prepared %d disks, want 1", node, len(prepared))
		}
		p := prepared[0]
		data, ok := byName["veltrix-"+p.GetFilesystemUuid()]
		if !ok {
			t.Fatalf("no volume for %s's disk %s", node, p.GetFilesystemUuid())
		}
		if data.Spec.Local == nil || data.Spec.Local.Path != p.GetPvPath() || *data.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
			data.Labels[resources.LabelNode] != node || data.Annotations[resources.AnnotationDiskGUID] != p.GetDiskGuid() {
			t.Errorf("data volume %s: local %v mode %v labels %v annotations %v", data.Name, data.Spec.Local, *data.Spec.VolumeMode, data.Labels, data.Annotations)
		}
		if q := data.Spec.Capacity[corev1.ResourceStorage]; q.Value() != p.GetXfsSizeBytes() {
			t.Errorf("data volume capacity %s, want the XFS size %d", q.String(), p.GetXfsSizeBytes())
		}
		vlog, ok := byName["veltrix-"+p.GetFilesystemUuid()+"-vlog"]
		// The Block volume names the raw partition by its GPT partition GUID, which a
		// reboot does not change, not by kernel name.
		if !ok || p.GetRawPartitionUuid() == "" || vlog.Spec.Local.Path != "/dev/disk/by-partuuid/"+p.GetRawPartitionUuid() ||
			*vlog.Spec.VolumeMode != corev1.PersistentVolumeBlock || p.GetXfsPercent() != 40 {
			t.Errorf("vlog volume %+v for raw partition %s (GUID %q, xfs %d%%)", vlog.Spec, p.GetRawDevice(), p.GetRawPartitionUuid(), p.GetXfsPercent())
		}
	}

	// The namespaced children.
	var sc storagev1.StorageClass
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "local-nvme"}, &sc); err != nil || sc.Provisioner != resources.NoProvisioner {
		t.Errorf("StorageClass: %v %s", err, sc.Provisioner)
	}
	var sts appsv1.StatefulSet
	testenv.Eventually(t, 30*time.Second, "StatefulSet", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts)
		return err == nil, "not there"
	})
	if *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %d, want 3", *sts.Spec.Replicas)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx-env"}, &cm); err != nil {
		t.Fatal(err)
	}
	if _, mapped := cm.Data[resources.EnvIndex]; mapped != low {
		t.Errorf("ConfigMap %v: VELTRIXDB_INDEX=map should be there exactly when vm.max_map_count is low (%v)", cm.Data, low)
	}
	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx-admin-token"}, &secret); err != nil || len(secret.Data[resources.AdminTokenKey]) < 32 {
		t.Errorf("admin token Secret: %v %d bytes", err, len(secret.Data[resources.AdminTokenKey]))
	}
	for _, name := range []string{"vx", "vx-headless"} {
		var svc corev1.Service
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			t.Errorf("Service %s: %v", name, err)
		}
	}
	if ev := eventReasons(t, c); ev["AgentUnreachable"] != corev1.EventTypeWarning {
		t.Errorf("events %v lack a Warning AgentUnreachable", ev)
	}

	// No hot loop: the unreachable node is asked again only as the back-off allows.
	before := f.calls.count("node-c")
	time.Sleep(4 * time.Second)
	if n := f.calls.count("node-c") - before; n > 6 {
		t.Errorf("node-c was asked %d times in 4 s: a hot loop", n)
	}

	// Deletion with reclaim policy Delete.
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the cluster gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &veltrixv1.VeltrixCluster{})
		return apierrors.IsNotFound(err), "still there"
	})
	// Deleted: without kube-controller-manager here, the pv-protection finalizer the API
	// server adds keeps them listed, marked for deletion.
	if err := env.Client.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp.IsZero() {
			t.Errorf("volume %s not deleted with reclaim policy Delete (finalizers %v)", pv.Name, pv.Finalizers)
		}
	}
	for _, node := range []string{"node-a", "node-b"} {
		if p := f.prepared(t, node); len(p) != 0 {
			t.Errorf("%s still has %d prepared disks after reclaim policy Delete", node, len(p))
		}
	}
}

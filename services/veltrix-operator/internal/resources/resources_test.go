package resources

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// cluster is a VeltrixCluster as the API server stores it after the schema's defaults.
func cluster(mut ...func(*veltrixv1.VeltrixCluster)) *veltrixv1.VeltrixCluster {
	c := &veltrixv1.VeltrixCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vx", Namespace: "db"},
		Spec: veltrixv1.VeltrixClusterSpec{
			Size: veltrixv1.DefaultSize, Version: veltrixv1.DefaultVersion, Image: veltrixv1.DefaultImage,
			ReplicationFactor: veltrixv1.DefaultReplicationFactor, StorageClassName: veltrixv1.DefaultStorageClassName,
			DisksPerNode: veltrixv1.DefaultDisksPerNode, ReclaimPolicy: veltrixv1.DefaultReclaimPolicy,
			ServerPort: veltrixv1.DefaultServerPort, MetricsPort: veltrixv1.DefaultMetricsPort, GossipPort: veltrixv1.DefaultGossipPort,
			RawVLog:                    veltrixv1.RawVLogSpec{XFSPartitionPercent: veltrixv1.DefaultXFSPartitionPercent},
			PodAntiAffinityTopologyKey: veltrixv1.DefaultPodAntiAffinityTopologyKey,
			Mode:                       veltrixv1.DefaultMode, Net: veltrixv1.DefaultNet,
			URingBridge: veltrixv1.DefaultURingBridge,
		},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func rawVLog(c *veltrixv1.VeltrixCluster) {
	c.Spec.RawVLog.Enabled = true
	c.Spec.DisksPerNode = 2
}

// golden compares obj's YAML with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, filepath.Join("testdata", name), got, *update)
}

func TestStatefulSetGolden(t *testing.T) {
	golden(t, "statefulset.yaml", StatefulSet(cluster(), 3, "h"))
	golden(t, "statefulset-rawvlog.yaml", StatefulSet(cluster(rawVLog, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.AuthConfig = &veltrixv1.SecretKeyRef{Name: "auth", Key: "auth.yaml"}
		c.Spec.AdminTokenSecret = &veltrixv1.SecretKeyRef{Name: "mine", Key: "t"}
		c.Spec.NodeSelector = map[string]string{"pool": "nvme"}
		c.Spec.Tolerations = []corev1.Toleration{{Key: "workload", Value: "veltrixdb", Effect: corev1.TaintEffectNoSchedule}}
	}), 5, "h2"))
}

func TestStatefulSetShape(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       *veltrixv1.VeltrixCluster
		seccomp corev1.SeccompProfileType
		claims  []string
		hasRaw  bool
	}{
		{"xfs only", cluster(), corev1.SeccompProfileTypeRuntimeDefault, []string{"data-0"}, false},
		{"raw vlog", cluster(rawVLog), corev1.SeccompProfileTypeUnconfined, []string{"data-0", "data-1", "vlog-0", "vlog-1"}, true},
		{"io_uring bridge, Unconfined asked for", cluster(uringBridge(veltrixv1.URingBridgeEnabled), seccomp(corev1.SeccompProfileTypeUnconfined, "")),
			corev1.SeccompProfileTypeUnconfined, []string{"data-0"}, false},
		{"io_uring bridge with sqpoll, a Localhost profile", cluster(uringBridge(veltrixv1.URingBridgeSQPoll), seccomp(corev1.SeccompProfileTypeLocalhost, "operator/veltrixdb-io-uring.json")),
			corev1.SeccompProfileTypeLocalhost, []string{"data-0"}, false},
		{"io_uring bridge disabled", cluster(uringBridge(veltrixv1.URingBridgeDisabled)), corev1.SeccompProfileTypeRuntimeDefault, []string{"data-0"}, false},
		{"raw vlog and the bridge", cluster(rawVLog, uringBridge(veltrixv1.URingBridgeSQPoll), seccomp(corev1.SeccompProfileTypeUnconfined, "")), corev1.SeccompProfileTypeUnconfined,
			[]string{"data-0", "data-1", "vlog-0", "vlog-1"}, true},
		{"raw vlog under a Localhost profile", cluster(rawVLog, seccomp(corev1.SeccompProfileTypeLocalhost, "operator/veltrixdb-io-uring.json")), corev1.SeccompProfileTypeLocalhost,
			[]string{"data-0", "data-1", "vlog-0", "vlog-1"}, true},
		{"RuntimeDefault asked for", cluster(seccomp(corev1.SeccompProfileTypeRuntimeDefault, "")), corev1.SeccompProfileTypeRuntimeDefault, []string{"data-0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StatefulSet(tc.c, 3, "h")
			p := s.Spec.Template.Spec
			if got := p.SecurityContext.SeccompProfile; got.Type != tc.seccomp || (got.LocalhostProfile != nil) != (tc.seccomp == corev1.SeccompProfileTypeLocalhost) {
				t.Errorf("seccomp %+v, want %s", got, tc.seccomp)
			} else if tc.c.Spec.SeccompProfile != nil && got.LocalhostProfile != nil && (got.LocalhostProfile == tc.c.Spec.SeccompProfile.LocalhostProfile || *got.LocalhostProfile != *tc.c.Spec.SeccompProfile.LocalhostProfile) {
				t.Errorf("localhostProfile %q: want a copy of the spec's %q", *got.LocalhostProfile, *tc.c.Spec.SeccompProfile.LocalhostProfile)
			}
			if s.Spec.UpdateStrategy.RollingUpdate == nil || s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.IntValue() != 1 {
				t.Errorf("update strategy %+v, want RollingUpdate maxUnavailable 1", s.Spec.UpdateStrategy)
			}
			if s.Spec.Template.Annotations[AnnotationSafeToEvict] != "false" {
				t.Errorf("pod annotations %v lack safe-to-evict false", s.Spec.Template.Annotations)
			}
			if *p.TerminationGracePeriodSeconds != 60 {
				t.Errorf("grace period %d", *p.TerminationGracePeriodSeconds)
			}
			if p.Containers[0].Lifecycle != nil {
				t.Errorf("lifecycle %+v: the distroless image has no shell for a preStop hook", p.Containers[0].Lifecycle)
			}
			if len(p.ReadinessGates) != 1 || p.ReadinessGates[0].ConditionType != veltrixv1.SearchReadyGate {
				t.Errorf("readiness gates %v", p.ReadinessGates)
			}
			anti := p.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			if len(anti) != 1 || anti[0].TopologyKey != tc.c.Spec.PodAntiAffinityTopologyKey {
				t.Errorf("anti-affinity %v", anti)
			}
			var claims []string
			for _, v := range s.Spec.VolumeClaimTemplates {
				claims = append(claims, v.Name)
				want := corev1.PersistentVolumeFilesystem
				if strings.HasPrefix(v.Name, VolumeVLog) {
					want = corev1.PersistentVolumeBlock
				}
				if *v.Spec.VolumeMode != want || v.Spec.Selector.MatchLabels[LabelCluster] != "vx" || v.Spec.Selector.MatchLabels[LabelNamespace] != "db" {
					t.Errorf("claim %s mode %s selector %v", v.Name, *v.Spec.VolumeMode, v.Spec.Selector.MatchLabels)
				}
			}
			if !slices.Equal(claims, tc.claims) {
				t.Errorf("claims %v, want %v", claims, tc.claims)
			}
			if got := len(p.Containers[0].VolumeDevices) > 0; got != tc.hasRaw {
				t.Errorf("volume devices %v", p.Containers[0].VolumeDevices)
			}
		})
	}
}

func seccomp(t corev1.SeccompProfileType, localhost string) func(*veltrixv1.VeltrixCluster) {
	return func(c *veltrixv1.VeltrixCluster) {
		c.Spec.SeccompProfile = &veltrixv1.SeccompProfile{Type: t}
		if localhost != "" {
			c.Spec.SeccompProfile.LocalhostProfile = &localhost
		}
	}
}

func uringBridge(b veltrixv1.URingBridge) func(*veltrixv1.VeltrixCluster) {
	return func(c *veltrixv1.VeltrixCluster) { c.Spec.URingBridge = b }
}

func TestArgs(t *testing.T) {
	args := Args(cluster(rawVLog))
	want := []string{
		"--addr=:9000", "--metrics-addr=:2112", "--node-id=$(POD_NAME)",
		"--peers=vx-0@vx-0.vx-headless.db.svc.cluster.local:9000,vx-1@vx-1.vx-headless.db.svc.cluster.local:9000,vx-2@vx-2.vx-headless.db.svc.cluster.local:9000",
		"--join=vx-0.vx-headless.db.svc.cluster.local:9000,vx-1.vx-headless.db.svc.cluster.local:9000,vx-2.vx-headless.db.svc.cluster.local:9000",
		"--advertise-addr=$(POD_NAME).vx-headless.db.svc.cluster.local:9000",
		"--mode=replicated", "--net=go",
		"--data-dirs=/var/lib/veltrix/data-0,/var/lib/veltrix/data-1",
		"--raw-vlogs=/dev/veltrix/vlog-0,/dev/veltrix/vlog-1",
		"--replication-factor=3",
	}
	if !slices.Equal(args, want) {
		t.Errorf("args\n%q\nwant\n%q", args, want)
	}
	// Scaling never changes the pod template: the bootstrap members are the first
	// replicationFactor ordinals whatever the size.
	big := cluster(rawVLog, func(c *veltrixv1.VeltrixCluster) { c.Spec.Size = 7 })
	if !slices.Equal(Args(big), args) {
		t.Errorf("size 7 changed the args: %q", Args(big))
	}
	standalone := cluster(func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Mode, c.Spec.Size, c.Spec.ReplicationFactor = veltrixv1.ModeStandalone, 1, 1
		c.Spec.Net = veltrixv1.NetCPP
		c.Spec.AuthConfig = nil
	})
	got := Args(standalone)
	if !slices.Contains(got, "--peers=vx-0@vx-0.vx-headless.db.svc.cluster.local:9000") || !slices.Contains(got, "--net=cpp") || slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--raw-vlogs") }) {
		t.Errorf("standalone args %q", got)
	}
}

func TestEngineEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		c        *veltrixv1.VeltrixCluster
		indexMap bool
		want     map[string]string
	}{
		{"defaults", cluster(), false, map[string]string{EnvReplicationFactor: "3"}},
		{"cache and map index", cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.CacheMaxSizeMB = new(int64(64)) }), true,
			map[string]string{EnvReplicationFactor: "3", EnvCacheMaxSizeMB: "64", EnvIndex: IndexMap}},
		{"io_uring bridge disabled: not set", cluster(uringBridge(veltrixv1.URingBridgeDisabled)), false, map[string]string{EnvReplicationFactor: "3"}},
		{"io_uring bridge", cluster(uringBridge(veltrixv1.URingBridgeEnabled)), false, map[string]string{EnvReplicationFactor: "3", EnvURingBridge: "on"}},
		{"io_uring bridge with sqpoll", cluster(uringBridge(veltrixv1.URingBridgeSQPoll)), false, map[string]string{EnvReplicationFactor: "3", EnvURingBridge: "sqpoll"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EngineEnv(tc.c, tc.indexMap)
			if len(got) != len(tc.want) {
				t.Fatalf("env %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
		})
	}
	if ConfigHash(EngineEnv(cluster(), false)) == ConfigHash(EngineEnv(cluster(uringBridge(veltrixv1.URingBridgeEnabled)), false)) {
		t.Error("the io_uring bridge does not change the config hash, so the pods would not roll")
	}
	if ConfigHash(EngineEnv(cluster(), false)) == ConfigHash(EngineEnv(cluster(), true)) {
		t.Error("the map index does not change the config hash, so the pods would not roll")
	}
	if ConfigHash(map[string]string{"a": "1", "b": "2"}) != ConfigHash(map[string]string{"b": "2", "a": "1"}) {
		t.Error("the config hash depends on map order")
	}
}

func TestPersistentVolumes(t *testing.T) {
	disks := []Disk{
		{Node: "n2", Index: 0, FilesystemUUID: "bbbb", DiskGUID: "g2", PVPath: "/mnt/opsuite/veltrix/db/vx/slot-0", XFSBytes: 400 << 20, RawDevice: "/dev/loop2p2", RawBytes: 600 << 20},
		{Node: "n1", Index: 0, FilesystemUUID: "aaaa", DiskGUID: "g1", WWN: "wwn-1", PVPath: "/mnt/opsuite/veltrix/db/vx/slot-0", XFSBytes: 400 << 20, RawDevice: "/dev/loop0p2", RawBytes: 600 << 20,
			RawPartitionUUID: "3b8beb36-aa92-a94f-a283-85e635e7c733"},
	}
	// n1's agent reports the raw partition's GUID: its Block volume names the partition by
	// it; n2's (an agent that does not) by kernel name.
	raw := PersistentVolumes(cluster(rawVLog), disks)
	golden(t, "pv-rawvlog.yaml", raw)
	for _, pv := range raw {
		want := map[string]string{"veltrix-aaaa-vlog": "/dev/disk/by-partuuid/3b8beb36-aa92-a94f-a283-85e635e7c733", "veltrix-bbbb-vlog": "/dev/loop2p2"}[pv.Name]
		if want != "" && pv.Spec.Local.Path != want {
			t.Errorf("Block volume %s at %s, want %s", pv.Name, pv.Spec.Local.Path, want)
		}
	}

	xfs := PersistentVolumes(cluster(), disks)
	if len(xfs) != 2 || xfs[0].Name != "veltrix-aaaa" || xfs[1].Name != "veltrix-bbbb" {
		t.Fatalf("without rawVLog: %d volumes %v", len(xfs), names(xfs))
	}
	if q := xfs[0].Spec.Capacity[corev1.ResourceStorage]; q.Value() != 400<<20 {
		t.Errorf("capacity %s, want the XFS size", q.String())
	}
	sized := PersistentVolumes(cluster(func(c *veltrixv1.VeltrixCluster) { q := resource.MustParse("1Gi"); c.Spec.DiskSize = &q }), disks)
	if q := sized[0].Spec.Capacity[corev1.ResourceStorage]; q.String() != "1Gi" {
		t.Errorf("capacity %s, want diskSize", q.String())
	}
	pv := xfs[0]
	if pv.Spec.Local == nil || pv.Spec.Local.Path != disks[1].PVPath || pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n1" {
		t.Errorf("pv %s local %v affinity %v", pv.Name, pv.Spec.Local, pv.Spec.NodeAffinity)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim %s: the operator decides, never the PV controller", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if pv.Annotations[AnnotationWWN] != "wwn-1" || pv.Annotations[AnnotationFilesystemUUID] != "aaaa" {
		t.Errorf("identity annotations %v", pv.Annotations)
	}
}

// TestPersistentVolumeLongNodeName: a node name may have 253 characters, a label value 63;
// the volume of a disk on such a node still validates, and its node is read back from the
// node affinity.
func TestPersistentVolumeLongNodeName(t *testing.T) {
	long := strings.Repeat("n", 63) + ".pool-a.eu-west-1.compute.internal"
	for _, node := range []string{"n1", long} {
		pvs := PersistentVolumes(cluster(), []Disk{{Node: node, FilesystemUUID: "aaaa", PVPath: "/mnt/p", XFSBytes: 1 << 30}})
		if len(pvs) != 1 {
			t.Fatalf("%d volumes", len(pvs))
		}
		pv := pvs[0]
		if errs := metav1validation.ValidateLabels(pv.Labels, field.NewPath("metadata", "labels")); len(errs) > 0 {
			t.Errorf("node %q: labels do not validate: %v", node, errs)
		}
		if got := VolumeNode(pv); got != node {
			t.Errorf("VolumeNode = %q, want %q", got, node)
		}
		if _, labelled := pv.Labels[LabelNode]; labelled != (node == "n1") {
			t.Errorf("node %q: label %s present %v", node, LabelNode, labelled)
		}
	}
}

func names(pvs []*corev1.PersistentVolume) []string {
	var out []string
	for _, p := range pvs {
		out = append(out, p.Name)
	}
	return out
}

func TestChildren(t *testing.T) {
	c := cluster()
	sc := StorageClass(c)
	if sc.Provisioner != NoProvisioner || string(*sc.VolumeBindingMode) != "WaitForFirstConsumer" || sc.Name != "local-nvme" {
		t.Errorf("storage class %s provisioner %s binding %s", sc.Name, sc.Provisioner, *sc.VolumeBindingMode)
	}
	h := HeadlessService(c)
	if h.Name != "vx-headless" || h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless %s %q %v", h.Name, h.Spec.ClusterIP, h.Spec.PublishNotReadyAddresses)
	}
	if s := ClientService(c); s.Name != "vx" || s.Spec.ClusterIP != "" || len(s.Spec.Ports) != 2 {
		t.Errorf("client service %s %+v", s.Name, s.Spec)
	}
	if r := AdminTokenRef(c); r.Name != "vx-admin-token" || r.Key != AdminTokenKey {
		t.Errorf("generated token ref %+v", r)
	}
	sm := ServiceMonitor(c)
	if sm.GetKind() != "ServiceMonitor" || sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != "db" {
		t.Errorf("service monitor %s %s %s", sm.GetAPIVersion(), sm.GetKind(), sm.GetNamespace())
	}
	// It selects the headless Service alone, whose port it scrapes.
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	sel := labels.SelectorFromSet(match)
	if !sel.Matches(labels.Set(h.Labels)) || sel.Matches(labels.Set(ClientService(c).Labels)) {
		t.Errorf("service monitor selector %v: want the headless Service %v alone, not the client one %v", match, h.Labels, ClientService(c).Labels)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	var named bool
	for _, p := range h.Spec.Ports {
		named = named || (len(eps) == 1 && p.Name == eps[0].(map[string]any)["port"])
	}
	if !named {
		t.Errorf("service monitor endpoints %v name no port of the headless Service %v", eps, h.Spec.Ports)
	}
	if got := PVPath("/mnt/opsuite/", c, 1); got != "/mnt/opsuite/veltrix/db/vx/slot-1" {
		t.Errorf("pv path %s", got)
	}
	if got := BootstrapMembers(cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.ReplicationFactor = 2 })); !slices.Equal(got, []string{"vx-0", "vx-1"}) {
		t.Errorf("bootstrap %v", got)
	}
}

// TestUpgradeThroughImageOrVersion: spec.image and spec.version each change the pod
// template's image (and nothing else of it), which the StatefulSet's rolling update rolls.
func TestUpgradeThroughImageOrVersion(t *testing.T) {
	base := StatefulSet(cluster(), 3, "h")
	for name, change := range map[string]func(*veltrixv1.VeltrixCluster){
		"image":   func(c *veltrixv1.VeltrixCluster) { c.Spec.Image = "registry.local:5000/veltrixdb" },
		"version": func(c *veltrixv1.VeltrixCluster) { c.Spec.Version = "1.18.0" },
	} {
		t.Run(name, func(t *testing.T) {
			c := cluster()
			change(c)
			got := StatefulSet(c, 3, "h")
			if img := got.Spec.Template.Spec.Containers[0].Image; img != c.Spec.ImageRef() || img == base.Spec.Template.Spec.Containers[0].Image {
				t.Fatalf("image %q, want %q (was %q)", img, c.Spec.ImageRef(), base.Spec.Template.Spec.Containers[0].Image)
			}
			got.Spec.Template.Spec.Containers[0].Image = base.Spec.Template.Spec.Containers[0].Image
			if !equality.Semantic.DeepEqual(got.Spec.Template, base.Spec.Template) {
				t.Errorf("changing spec.%s changed more of the pod template than its image", name)
			}
		})
	}
}

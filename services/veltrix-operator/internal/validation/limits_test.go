package validation

import (
	"context"
	"strings"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCountLimits: every count has an upper bound the API server enforces with a message
// that names it, and the bound itself is accepted.
func TestCountLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	type spec = veltrixv1.VeltrixClusterSpec
	tolerations := func(n int) []corev1.Toleration {
		out := make([]corev1.Toleration, n)
		for i := range out {
			out[i] = corev1.Toleration{Key: "k" + rand.String(8), Operator: corev1.TolerationOpExists}
		}
		return out
	}
	selector := func(n int) map[string]string {
		out := map[string]string{}
		for len(out) < n {
			out["k"+rand.String(8)] = "v"
		}
		return out
	}
	cases := []struct {
		name string
		spec func(*spec)
		want string // "" accepts
	}{
		{name: "size at the limit", spec: func(s *spec) { s.Size = veltrixv1.MaxSize }},
		{name: "two billion members", spec: func(s *spec) { s.Size = 2000000000 },
			want: "spec.size: Invalid value: 2000000000: spec.size in body should be less than or equal to 256"},
		{name: "replicationFactor at the limit", spec: func(s *spec) {
			s.Size, s.ReplicationFactor = veltrixv1.MaxReplicationFactor, veltrixv1.MaxReplicationFactor
		}},
		{name: "replicationFactor above the limit", spec: func(s *spec) { s.Size, s.ReplicationFactor = 100, veltrixv1.MaxReplicationFactor+1 },
			want: "spec.replicationFactor in body should be less than or equal to 16"},
		{name: "disksPerNode at the limit", spec: func(s *spec) { s.DisksPerNode = veltrixv1.MaxDisksPerNode }},
		{name: "disksPerNode above the limit", spec: func(s *spec) { s.DisksPerNode = veltrixv1.MaxDisksPerNode + 1 },
			want: "spec.disksPerNode in body should be less than or equal to 32"},
		{name: "cacheMaxSizeMB at the limit", spec: func(s *spec) { s.CacheMaxSizeMB = ptr.To(veltrixv1.MaxCacheMaxSizeMB) }},
		{name: "cacheMaxSizeMB above the limit", spec: func(s *spec) { s.CacheMaxSizeMB = ptr.To(veltrixv1.MaxCacheMaxSizeMB + 1) },
			want: "cacheMaxSizeMB must be at most 16777216 (16 TiB)"},
		{name: "64 tolerations", spec: func(s *spec) { s.Tolerations = tolerations(64) }},
		{name: "65 tolerations", spec: func(s *spec) { s.Tolerations = tolerations(65) },
			want: "spec.tolerations: Too many: 65: must have at most 64 items"},
		{name: "64 node selector labels", spec: func(s *spec) { s.NodeSelector = selector(64) }},
		{name: "65 node selector labels", spec: func(s *spec) { s.NodeSelector = selector(65) },
			want: "spec.nodeSelector: Too many: 65: must have at most 64 items"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			tc.spec(&c.Spec)
			if v := verdict(env.Client.Create(context.Background(), c), tc.want); v != "" {
				t.Error(v)
			}
		})
	}
}

// TestNameLimits: metadata.name is at most MaxNameLength characters and a DNS-1035 label,
// since it names the client Service and the StatefulSet, whose revision label
// <name>-<hash> is the longest name derived from it.
func TestNameLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	longest := "v" + rand.String(veltrixv1.MaxNameLength-1)
	cases := []struct {
		name, metaName, want string
	}{
		{name: "longest name", metaName: longest},
		{name: "one character more", metaName: longest + "x",
			want: "metadata.name must be at most 52 characters: the StatefulSet <name> labels its pods with controller-revision-hash <name>-<hash of up to 10 characters>, which must fit in 63"},
		{name: "starts with a digit", metaName: "1" + rand.String(5),
			want: "metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.')"},
		{name: "with a dot", metaName: "vc." + rand.String(5), want: "metadata.name must start with a lowercase letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			c.Name = tc.metaName
			if v := verdict(env.Client.Create(context.Background(), c), tc.want); v != "" {
				t.Error(v)
			}
		})
	}
}

// TestLongestNameFits: everything the operator builds for a cluster of the longest
// accepted name, in a namespace of the longest name, at the largest size and disk count
// with raw VLogs, is accepted by the API server, with the StatefulSet controller's own
// children (revision, the last member's pod and claims) and the members' DNS names.
func TestLongestNameFits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, strings.Repeat("n", 57))
	c := minimal(ns)
	c.Name = "v" + rand.String(veltrixv1.MaxNameLength-1)
	c.Spec.Size, c.Spec.DisksPerNode = veltrixv1.MaxSize, veltrixv1.MaxDisksPerNode
	c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 20}
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatalf("the longest name is refused: %v", err)
	}
	engineEnv := resources.EngineEnv(c, false)
	sts := resources.StatefulSet(c, c.Spec.Size, resources.ConfigHash(engineEnv))
	// The members run as the cluster's ServiceAccount, which the API server looks up.
	sa := resources.ServiceAccount(c)
	if err := env.Client.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
	disk := resources.Disk{Node: "node-1", Slot: 0, Index: veltrixv1.MaxDisksPerNode - 1,
		FilesystemUUID: "0b6b1f0e-3c1c-4b8e-9f57-2d1c3f4e5a6b", PVPath: "/var/lib/pv", XFSBytes: 1 << 30,
		RawDevice: "/dev/nvme0n1p2", RawPartitionUUID: "5f0c9a1e-7a1b-4c2d-8e3f-9a0b1c2d3e4f", RawBytes: 1 << 30}
	objs := []client.Object{
		resources.ClientService(c), resources.HeadlessService(c), resources.ConfigMap(c, engineEnv),
		resources.AdminTokenSecret(c, "token"), sts,
	}
	for _, pv := range resources.PersistentVolumes(c, []resources.Disk{disk}) {
		objs = append(objs, pv)
	}
	last := c.Spec.Size - 1
	objs = append(objs, testenv.StatefulSetChildren(sts, last)...)
	testenv.AcceptedAsIs(t, env.Client, objs...)
	testenv.IsDNSName(t, "member FQDN", resources.PodFQDN(c, resources.PodName(c, last)))
}

// TestNameRulesSpareStoredObjects: a cluster stored before the name rules, with a name
// they now refuse, can still be updated and lose its finalizer: the rules apply on create
// only, so upgrading the CRD strands no object.
func TestNameRulesSpareStoredObjects(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	tooLong := func() *veltrixv1.VeltrixCluster {
		c := minimal(ns)
		c.Name = "v" + rand.String(veltrixv1.MaxNameLength)
		return c
	}
	c := tooLong()
	testenv.AdmittedBeforeNameRules(t, env.Client, "veltrixclusters.veltrix.io", c, tooLong())
	testenv.StillUpdatable(t, env.Client, c)
}

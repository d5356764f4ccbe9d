package validation

import (
	"context"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCountLimits: every count of both kinds has an upper bound the API server enforces
// with a message that names it, and the bound itself is accepted.
func TestCountLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	tolerations := func(n int) []corev1.Toleration {
		out := make([]corev1.Toleration, n)
		for i := range out {
			out[i] = corev1.Toleration{Key: "k" + rand.String(8), Operator: corev1.TolerationOpExists}
		}
		return out
	}
	containers := func(n int) []corev1.Container {
		out := make([]corev1.Container, n)
		for i := range out {
			out[i] = corev1.Container{Name: "c" + rand.String(8)}
		}
		return out
	}
	pullSecrets := func(n int) []corev1.LocalObjectReference {
		out := make([]corev1.LocalObjectReference, n)
		for i := range out {
			out[i] = corev1.LocalObjectReference{Name: "s" + rand.String(8)}
		}
		return out
	}
	type vkc = valkeyv1.ValkeyCluster
	clusters := []struct {
		name   string
		mutate func(*vkc)
		want   string // "" accepts
	}{
		{name: "shards at the limit", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = valkeyv1.MaxShards, 0 }},
		{name: "shards above the limit", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = valkeyv1.MaxShards+1, 0 },
			want: "shards must be at most 1000"},
		{name: "two billion shards", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = 2000000000, 0 },
			want: "shards must be at most 1000"},
		{name: "replicas at the limit", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = 3, valkeyv1.MaxReplicas }},
		{name: "replicas above the limit", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = 3, valkeyv1.MaxReplicas+1 },
			want: "replicas must be at most 15 per shard"},
		{name: "two billion replicas", mutate: func(c *vkc) { c.Spec.Shards, c.Spec.Replicas = 1, 2000000000 },
			want: "replicas must be at most 15 per shard"},
		{name: "64 tolerations", mutate: func(c *vkc) { c.Spec.Tolerations = tolerations(64) }},
		{name: "65 tolerations", mutate: func(c *vkc) { c.Spec.Tolerations = tolerations(65) },
			want: "spec.tolerations: Too many: 65: must have at most 64 items"},
		{name: "65 scheduling tolerations", mutate: func(c *vkc) {
			c.Spec.Scheduling = &valkeyv1.SchedulingSpec{Tolerations: tolerations(65)}
		}, want: "spec.scheduling.tolerations: Too many: 65: must have at most 64 items"},
		{name: "17 topology spread constraints", mutate: func(c *vkc) {
			c.Spec.Scheduling = &valkeyv1.SchedulingSpec{TopologySpreadConstraints: make([]corev1.TopologySpreadConstraint, 17)}
		}, want: "spec.scheduling.topologySpreadConstraints: Too many: 17: must have at most 16 items"},
		{name: "17 containers", mutate: func(c *vkc) { c.Spec.Containers = containers(17) },
			want: "spec.containers: Too many: 17: must have at most 16 items"},
		{name: "65 exporter args", mutate: func(c *vkc) { c.Spec.Exporter.Args = make([]string, 65) },
			want: "spec.exporter.args: Too many: 65: must have at most 64 items"},
		{name: "17 image pull secrets", mutate: func(c *vkc) { c.Spec.ImagePullSecrets = pullSecrets(17) },
			want: "spec.imagePullSecrets: Too many: 17: must have at most 16 items"},
	}
	for _, tc := range clusters {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			tc.mutate(c)
			expectAdmission(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
	type vkn = valkeyv1.ValkeyNode
	nodes := []struct {
		name   string
		mutate func(*vkn)
		want   string // "" accepts
	}{
		{name: "node: last shard index", mutate: func(n *vkn) { n.Spec.ShardIndex = valkeyv1.MaxShards - 1 }},
		{name: "node: shard index above the limit", mutate: func(n *vkn) { n.Spec.ShardIndex = valkeyv1.MaxShards },
			want: "shardIndex must be at most 999"},
		{name: "node: last node index", mutate: func(n *vkn) { n.Spec.NodeIndex = valkeyv1.MaxReplicas }},
		{name: "node: node index above the limit", mutate: func(n *vkn) { n.Spec.NodeIndex = 2000000000 },
			want: "nodeIndex must be at most 15"},
		{name: "node: grace period of a day", mutate: func(n *vkn) { n.Spec.TerminationGracePeriodSeconds = ptr.To[int64](86400) }},
		{name: "node: grace period above a day", mutate: func(n *vkn) { n.Spec.TerminationGracePeriodSeconds = ptr.To[int64](86401) },
			want: "spec.terminationGracePeriodSeconds in body should be less than or equal to 86400"},
		{name: "node: 65 tolerations", mutate: func(n *vkn) { n.Spec.Tolerations = tolerations(65) },
			want: "spec.tolerations: Too many: 65: must have at most 64 items"},
		{name: "node: 17 containers", mutate: func(n *vkn) { n.Spec.Containers = containers(17) },
			want: "spec.containers: Too many: 17: must have at most 16 items"},
	}
	for _, tc := range []struct {
		name   string
		domain string
		want   string
	}{
		{name: "longest cluster domain", domain: domainOf(valkeyv1.MaxClusterDomainLength)},
		{name: "cluster domain one character longer", domain: domainOf(valkeyv1.MaxClusterDomainLength + 1),
			want: "networking.clusterDomain must be at most 136 characters: the certificate names *.<cluster>.<namespace>.svc.<clusterDomain> must stay within the 253 of a DNS name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			c.Spec.Networking = &valkeyv1.NetworkingSpec{ClusterDomain: tc.domain}
			expectAdmission(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
	for _, tc := range nodes {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode(ns)
			tc.mutate(n)
			expectAdmission(t, env.Client.Create(context.Background(), n), tc.want)
		})
	}
}

// TestNameLimits: a ValkeyCluster's name is at most MaxClusterNameLength characters and a
// DNS-1035 label (it names the Service, and its nodes' StatefulSets add -<shard>-<index>
// and the revision hash); a ValkeyNode's at most MaxNodeNameLength and a DNS-1123 label.
func TestNameLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	longestCluster := "c" + rand.String(valkeyv1.MaxClusterNameLength-1)
	clusters := []struct{ name, metaName, want string }{
		{name: "longest cluster name", metaName: longestCluster},
		{name: "cluster name one character longer", metaName: longestCluster + "x",
			want: "metadata.name must be at most 46 characters: each node's StatefulSet <name>-<shard>-<index> labels its pod with controller-revision-hash <name>-<shard>-<index>-<hash of up to 10 characters>, which must fit in 63"},
		{name: "cluster name starting with a digit", metaName: "1" + rand.String(5),
			want: "metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.')"},
		{name: "cluster name with a dot", metaName: "vk." + rand.String(5), want: "metadata.name must start with a lowercase letter"},
	}
	for _, tc := range clusters {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			c.Name = tc.metaName
			expectAdmission(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
	longestNode := "n" + rand.String(valkeyv1.MaxNodeNameLength-1)
	nodes := []struct{ name, metaName, clusterName, want string }{
		{name: "longest node name", metaName: longestNode},
		{name: "node name one character longer", metaName: longestNode + "x",
			want: "metadata.name must be at most 52 characters: the StatefulSet <name> labels its pod with controller-revision-hash <name>-<hash of up to 10 characters>, which must fit in 63"},
		{name: "node name with a dot", metaName: "vkn." + rand.String(5),
			want: "metadata.name must hold only lowercase letters, digits and '-' (no '.')"},
		{name: "longest cluster name in a node", clusterName: longestCluster},
		{name: "cluster name in a node one character longer", clusterName: longestCluster + "x",
			want: "spec.clusterName: Too long: may not be more than 46 bytes"},
		{name: "cluster name in a node with a dot", clusterName: "vk.c",
			want: "clusterName must be a ValkeyCluster's name: at most 46 characters, a lowercase letter first"},
	}
	for _, tc := range []struct {
		name   string
		domain string
		want   string
	}{
		{name: "longest cluster domain", domain: domainOf(valkeyv1.MaxClusterDomainLength)},
		{name: "cluster domain one character longer", domain: domainOf(valkeyv1.MaxClusterDomainLength + 1),
			want: "networking.clusterDomain must be at most 136 characters: the certificate names *.<cluster>.<namespace>.svc.<clusterDomain> must stay within the 253 of a DNS name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			c.Spec.Networking = &valkeyv1.NetworkingSpec{ClusterDomain: tc.domain}
			expectAdmission(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
	for _, tc := range nodes {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode(ns)
			if tc.metaName != "" {
				n.Name = tc.metaName
			}
			if tc.clusterName != "" {
				n.Spec.ClusterName = tc.clusterName
			}
			expectAdmission(t, env.Client.Create(context.Background(), n), tc.want)
		})
	}
}

// TestLongestNameFits: for a cluster of the longest accepted name, in a namespace of the
// longest name, in the shape whose node names are longest (shard and index of 4 digits in
// all), the ValkeyNode the operator derives is admitted, and the API server accepts (dry
// run) the cluster's Service, ConfigMap, Secrets and PodDisruptionBudget, the node's
// StatefulSet and PVC, and the StatefulSet controller's children (revision and pod); the
// pod's DNS name and the certificate's names are DNS names.
func TestLongestNameFits(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, strings.Repeat("n", 57))
	c := validCluster(ns)
	c.Name = "c" + rand.String(valkeyv1.MaxClusterNameLength-1)
	// The shape with the longest last node name among all shards × (replicas + 1) <= 1000.
	var last resources.Position
	for shards := 1; shards <= valkeyv1.MaxShards; shards++ {
		replicas := min(valkeyv1.MaxReplicas, valkeyv1.MaxNodes/shards-1)
		p := resources.Position{Shard: shards - 1, Index: replicas}
		if len(resources.NodeName(c.Name, p.Shard, p.Index)) > len(resources.NodeName(c.Name, last.Shard, last.Index)) {
			last, c.Spec.Shards, c.Spec.Replicas = p, int32(shards), int32(replicas)
		}
	}
	if got, want := len(resources.NodeName(c.Name, last.Shard, last.Index)), len(c.Name)+6; got != want {
		t.Fatalf("the longest node name is %d characters, want the cluster's name plus 6 (-sss-i or -ss-ii): %d", got, want)
	}
	c.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")}
	c.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
	c.Spec.Networking = &valkeyv1.NetworkingSpec{ClusterDomain: domainOf(valkeyv1.MaxClusterDomainLength)}
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatalf("the longest name is refused: %v", err)
	}
	node := resources.ValkeyNode(c, last, "restart-hash")
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatalf("the node %q of the longest cluster name is refused: %v", node.Name, err)
	}
	objs := []client.Object{resources.Service(c), resources.ConfigMap(c, "", ""), resources.PodDisruptionBudget(c)}
	for _, name := range []string{resources.InternalSecretName(c.Name), resources.ACLSecretName(c.Name),
		resources.SelfSignedTLSSecretName(c.Name), resources.SelfSignedCASecretName(c.Name)} {
		objs = append(objs, resources.Secret(c, name, nil))
	}
	w := resources.NodeWorkload(node, resources.NodeOptions{})
	if w.StatefulSet == nil || w.PVC == nil {
		t.Fatalf("node workload: want a StatefulSet and a PVC, got %+v", w)
	}
	objs = append(objs, w.StatefulSet, w.PVC)
	objs = append(objs, testenv.StatefulSetChildren(w.StatefulSet, 0)...)
	testenv.AcceptedAsIs(t, env.Client, objs...)
	testenv.IsDNSName(t, "pod FQDN", resources.PodName(node.Name)+"."+resources.ServiceName(c.Name)+"."+ns+".svc.cluster.local")
	for _, name := range resources.TLSDNSNames(c.Name, ns, c.Spec.Networking.ClusterDomain) {
		// A wildcard counts as one character of a label: check it as "x".
		testenv.IsDNSName(t, "certificate name", strings.Replace(name, "*", "x", 1))
	}
}

// TestNameRulesSpareStoredObjects: a cluster and a node stored before the name rules, with
// names they now refuse, can still be updated and lose their finalizers: the rules apply
// on create only, so upgrading the CRDs strands no object.
func TestNameRulesSpareStoredObjects(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	t.Run("cluster", func(t *testing.T) {
		tooLong := func() *valkeyv1.ValkeyCluster {
			c := validCluster(ns)
			c.Name = "c" + rand.String(valkeyv1.MaxClusterNameLength)
			return c
		}
		c := tooLong()
		testenv.AdmittedBeforeNameRules(t, env.Client, "valkeyclusters.valkey.io", c, tooLong())
		testenv.StillUpdatable(t, env.Client, c)
	})
	t.Run("node", func(t *testing.T) {
		tooLong := func() *valkeyv1.ValkeyNode {
			n := validNode(ns)
			n.Name = "n" + rand.String(valkeyv1.MaxNodeNameLength)
			return n
		}
		n := tooLong()
		testenv.AdmittedBeforeNameRules(t, env.Client, "valkeynodes.valkey.io", n, tooLong())
		testenv.StillUpdatable(t, env.Client, n)
	})
}

// domainOf is a valid DNS domain of exactly n characters (n >= 1): labels of 63 and the
// rest, joined by dots.
func domainOf(n int) string {
	var labels []string
	for n > 64 {
		labels = append(labels, strings.Repeat("d", 63))
		n -= 64
	}
	return strings.Join(append(labels, strings.Repeat("d", n)), ".")
}

package validation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

func validCluster(ns string) *valkeyv1.ValkeyCluster {
	return &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vkc-" + rand.String(5), Namespace: ns},
		Spec:       valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1},
	}
}

// TestClusterAdmission: each rule refuses its case with its own message; valid edge
// cases (one shard, no replicas) are accepted, since a small cluster is a warning, not an
// error.
func TestClusterAdmission(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	persistence := func(size string) *valkeyv1.PersistenceSpec {
		return &valkeyv1.PersistenceSpec{Size: resource.MustParse(size)}
	}
	cases := []struct {
		name   string
		mutate func(*valkeyv1.ValkeyCluster)
		want   string // "" accepts
	}{
		{name: "valid", mutate: func(*valkeyv1.ValkeyCluster) {}},
		{name: "one shard without replicas is allowed", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Shards, c.Spec.Replicas = 1, 0 }},
		{name: "zero shards", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Shards = 0 },
			want: "shards must be at least 1"},
		{name: "negative replicas", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Replicas = -1 },
			want: "replicas must be 0 or more"},
		{name: "too many nodes", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Shards, c.Spec.Replicas = 501, 1 },
			want: "must not exceed 1000 nodes"},
		{name: "request above limit", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}
		}, want: "resources.requests must not exceed resources.limits"},
		{name: "request without limit", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
		}},
		{name: "zero persistence size", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Persistence = persistence("0") },
			want: "persistence.size must be a positive quantity"},
		{name: "persistence on a Deployment", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Persistence, c.Spec.WorkloadType = persistence("1Gi"), valkeyv1.WorkloadTypeDeployment
		}, want: "persistence needs workloadType StatefulSet"},
		{name: "reclaim policy", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Persistence = persistence("1Gi")
			c.Spec.Persistence.ReclaimPolicy = "Recycle"
		}, want: `spec.persistence.reclaimPolicy: Unsupported value: "Recycle"`},
		{name: "config cluster-enabled", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"cluster-enabled": "no"}
		},
			want: "config must not set cluster-enabled, cluster-config-file, port"},
		{name: "config PORT in capitals", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Config = map[string]valkeyv1.ConfigValue{"PORT": "7000"} },
			want: "the operator sets them to run the node in cluster mode"},
		{name: "config cluster-config-file", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"cluster-config-file": "x.conf"}
		},
			want: "config must not set cluster-enabled"},
		{name: "config dir", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Config = map[string]valkeyv1.ConfigValue{"dir": "/tmp"} },
			want: "config must not set cluster-enabled"},
		{name: "config announce ip", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"cluster-announce-ip": "1.2.3.4"}
		},
			want: "config must not set cluster-enabled"},
		{name: "config requirepass", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Config = map[string]valkeyv1.ConfigValue{"requirepass": "x"} },
			want: "config must not set aclfile, requirepass, masterauth or masteruser: declare users in spec.users"},
		{name: "config tls file", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"tls-cert-file": "/x"}
		},
			want: "configure TLS in spec.tls"},
		{name: "config key with a space", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"maxmemory policy": "x"}
		},
			want: "config keys are valkey.conf directive names"},
		{name: "config value with a newline", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"maxmemory-policy": "noeviction\nport 7000"}
		}, want: "config values must be a single line"},
		{name: "config tuning allowed", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Config = map[string]valkeyv1.ConfigValue{"maxmemory": "100mb", "cluster-node-timeout": "5000", "tls-ciphers": "DEFAULT"}
		}},
		{name: "grace period zero", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) },
			want: "terminationGracePeriodSeconds must be between 1 and 86400"},
		{name: "short grace period is a warning, not an error", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		}},
		{name: "reserved user name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "_operator", NoPassword: true}}
		}, want: "user names starting with '_' are reserved"},
		{name: "operator's user name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "valkey-operator", NoPassword: true}}
		}, want: "user names valkey-operator, valkey-replication and valkey-exporter are reserved"},
		{name: "replication user name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "valkey-replication", NoPassword: true}}
		}, want: "user names valkey-operator, valkey-replication and valkey-exporter are reserved"},
		{name: "exporter user name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "valkey-exporter", NoPassword: true}}
		}, want: "user names valkey-operator, valkey-replication and valkey-exporter are reserved"},
		{name: "a name that only starts like a reserved one", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "valkey-operator-2", NoPassword: true}}
		}},
		{name: "user name with a space", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "al ice", NoPassword: true}}
		}, want: "user names may contain only letters, digits"},
		{name: "nopass and password keys", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", NoPassword: true, PasswordSecret: valkeyv1.PasswordSecretSpec{Keys: []string{"pw"}}}}
		}, want: "either nopass: true or passwordSecret.keys, not both"},
		{name: "permissions with a newline", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", RawACL: "+@all\nuser root on nopass +@all"}}
		}, want: "permissions must be a single line"},
		{name: "command with a prefix", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", Commands: valkeyv1.CommandsACLSpec{Allow: []string{"+get"}}}}
		}, want: "commands.allow entries are a command (get)"},
		{name: "denied command with a space", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", Commands: valkeyv1.CommandsACLSpec{Deny: []string{"config set"}}}}
		}, want: "commands.deny entries are a command"},
		{name: "key pattern with a space", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", Keys: valkeyv1.KeysACLSpec{ReadWrite: []string{"app: *"}}}}
		}, want: "spec.users[0].keys.readWrite[0]: Invalid value"},
		{name: "password secret name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "My_Secret"}}}
		}, want: "passwordSecret.name must be a Secret name"},
		{name: "duplicate user names", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "alice", NoPassword: true}, {Name: "alice", NoPassword: true}}
		}, want: `spec.users[1]: Duplicate value`},
		{name: "tls without a certificate source", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.TLS = &valkeyv1.TLSConfig{} },
			want: "tls needs exactly one certificate source"},
		{name: "tls with both sources", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: "cert"}, SelfSigned: true}
		}, want: "tls needs exactly one certificate source"},
		{name: "tls self-signed", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true} }},
		{name: "tls secret name", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: "Cert_1"}}
		}, want: "tls.certificate.secretName must be a Secret name"},
		{name: "tls twice", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
			c.Spec.Networking = &valkeyv1.NetworkingSpec{TLS: &valkeyv1.TLSSpec{Certificates: valkeyv1.TLSCertificates{Server: valkeyv1.CertificateSource{SecretName: "cert"}}}}
		}, want: "TLS is configured twice"},
		{name: "networking tls without a secret", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{TLS: &valkeyv1.TLSSpec{}}
		}, want: "networking.tls.certificates.server.secretName must name a Secret"},
		{name: "hostname announce on a Deployment", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.WorkloadType = valkeyv1.WorkloadTypeDeployment
			c.Spec.Networking = &valkeyv1.NetworkingSpec{Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeHostname}}
		}, want: "preferredEndpointType Hostname needs stable pod names"},
		{name: "external load balancer", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{External: &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeLoadBalancer,
				ServiceAnnotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}}}
		}},
		{name: "external node port with IP discovery", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{External: &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeNodePort},
				Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeIP}}
		}},
		{name: "external without a mode", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{External: &valkeyv1.ExternalSpec{}}
		}, want: `spec.networking.external.mode: Unsupported value: ""`},
		{name: "external of type ClusterIP", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{External: &valkeyv1.ExternalSpec{Mode: "ClusterIP"}}
		}, want: `spec.networking.external.mode: Unsupported value: "ClusterIP"`},
		{name: "external with hostname discovery", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Networking = &valkeyv1.NetworkingSpec{External: &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeLoadBalancer},
				Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeHostname}}
		}, want: "networking.external announces each node's Service address in the hostname clients are sent to"},
		{name: "scheduling twice", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Scheduling = &valkeyv1.SchedulingSpec{PriorityClassName: "high"}
			c.Spec.NodeSelector = map[string]string{"pool": "valkey"}
		}, want: "scheduling is configured twice"},
		{name: "pdb mode", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.PodDisruptionBudget = &valkeyv1.PodDisruptionBudgetConfig{Mode: "Managed"}
		}, want: `spec.podDisruptionBudget.mode: Unsupported value: "Managed"`},
		{name: "zone listed twice", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Scheduling = &valkeyv1.SchedulingSpec{Zone: &valkeyv1.ZoneScheduling{Pinning: &valkeyv1.ZonePinning{Zones: []string{"a", "b", "a"}}}}
		}, want: "zone.pinning.zones must list each zone once"},
		{name: "zone pinning with a spread", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Scheduling = &valkeyv1.SchedulingSpec{Zone: &valkeyv1.ZoneScheduling{
				Pinning: &valkeyv1.ZonePinning{Zones: []string{"a", "b"}},
				Spread:  valkeyv1.ZoneSpread{Shard: valkeyv1.SpreadConstraint{Mode: valkeyv1.SpreadRequired}},
			}}
		}, want: "zone.pinning already fixes every pod's zone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			tc.mutate(c)
			expectAdmission(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
}

// TestClusterUpdateRules: changes that would lose data or move pods are refused on update;
// growing the volume and scaling are not.
func TestClusterUpdateRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	cases := []struct {
		name   string
		mutate func(*valkeyv1.ValkeyCluster)
		want   string
	}{
		{name: "scale and grow", mutate: func(c *valkeyv1.ValkeyCluster) {
			c.Spec.Shards, c.Spec.Replicas = 5, 2
			c.Spec.Persistence.Size = resource.MustParse("2Gi")
		}},
		{name: "shrink the volume", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Persistence.Size = resource.MustParse("512Mi") },
			want: "persistence.size can only grow"},
		{name: "change the storage class", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Persistence.StorageClassName = ptr.To("other") },
			want: "persistence.storageClassName is immutable"},
		{name: "drop the storage class", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Persistence.StorageClassName = nil },
			want: "persistence.storageClassName is immutable"},
		{name: "remove persistence", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.Persistence = nil },
			want: "persistence cannot be removed once set"},
		{name: "change the workload type", mutate: func(c *valkeyv1.ValkeyCluster) { c.Spec.WorkloadType = valkeyv1.WorkloadTypeDeployment },
			want: "workloadType is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := validCluster(ns)
			c.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To("standard")}
			if err := env.Client.Create(ctx, c); err != nil {
				t.Fatalf("creating: %v", err)
			}
			tc.mutate(c)
			expectAdmission(t, env.Client.Update(ctx, c), tc.want)
		})
	}

	t.Run("add persistence", func(t *testing.T) {
		ctx := context.Background()
		c := validCluster(ns)
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatalf("creating: %v", err)
		}
		c.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")}
		expectAdmission(t, env.Client.Update(ctx, c), "persistence cannot be added to a running cluster")
	})
}

func validNode(ns string) *valkeyv1.ValkeyNode {
	return &valkeyv1.ValkeyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "vkn-" + rand.String(5), Namespace: ns},
		Spec: valkeyv1.ValkeyNodeSpec{
			ClusterName: "demo", ShardIndex: 1, NodeIndex: 0, RoleHint: valkeyv1.RolePrimary,
			Image:       "valkey/valkey:9.0",
			Persistence: &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")},
		},
	}
}

// TestNodeAdmission: a ValkeyNode keeps its place in the cluster and its volume.
func TestNodeAdmission(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkn-")
	creates := []struct {
		name   string
		mutate func(*valkeyv1.ValkeyNode)
		want   string
	}{
		{name: "valid", mutate: func(*valkeyv1.ValkeyNode) {}},
		{name: "no cluster name", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.ClusterName = "" },
			want: "spec.clusterName: Invalid value"},
		{name: "negative shard", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.ShardIndex = -1 },
			want: "spec.shardIndex: Invalid value"},
		{name: "role hint", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.RoleHint = "master" },
			want: `spec.roleHint: Unsupported value: "master"`},
		{name: "persistence on a Deployment", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.WorkloadType = valkeyv1.WorkloadTypeDeployment },
			want: "persistence needs workloadType StatefulSet"},
	}
	for _, tc := range creates {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode(ns)
			tc.mutate(n)
			expectAdmission(t, env.Client.Create(context.Background(), n), tc.want)
		})
	}
	updates := []struct {
		name   string
		mutate func(*valkeyv1.ValkeyNode)
		want   string
	}{
		{name: "new image and bigger volume", mutate: func(n *valkeyv1.ValkeyNode) {
			n.Spec.Image = "valkey/valkey:9.1"
			n.Spec.Persistence.Size = resource.MustParse("2Gi")
		}},
		{name: "another cluster", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.ClusterName = "other" },
			want: "clusterName is immutable"},
		{name: "another shard", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.ShardIndex = 2 },
			want: "shardIndex is immutable"},
		{name: "another position", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.NodeIndex = 1 },
			want: "nodeIndex is immutable"},
		{name: "smaller volume", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.Persistence.Size = resource.MustParse("1Mi") },
			want: "persistence.size can only grow"},
		{name: "volume removed", mutate: func(n *valkeyv1.ValkeyNode) { n.Spec.Persistence = nil },
			want: "persistence cannot be added or removed on a ValkeyNode"},
	}
	for _, tc := range updates {
		t.Run("update "+tc.name, func(t *testing.T) {
			ctx := context.Background()
			n := validNode(ns)
			if err := env.Client.Create(ctx, n); err != nil {
				t.Fatalf("creating: %v", err)
			}
			tc.mutate(n)
			expectAdmission(t, env.Client.Update(ctx, n), tc.want)
		})
	}
}

// TestDisabledUserSurvivesDefaulting: a Go client can store enabled: false; the CRD
// default (true) applies only when the field is absent.
func TestDisabledUserSurvivesDefaulting(t *testing.T) {
	ctx := context.Background()
	c := validCluster(testenv.NewNamespace(t, env.Client, "vkc-"))
	c.Spec.Users = []valkeyv1.UserACLSpec{{Name: "off", Enabled: ptr.To(false)}, {Name: "on"}}
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := &valkeyv1.ValkeyCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Users[0].IsEnabled() || got.Spec.Users[1].Enabled == nil || !*got.Spec.Users[1].Enabled {
		t.Errorf("stored users %+v %+v: want off disabled, on defaulted to enabled", got.Spec.Users[0], got.Spec.Users[1])
	}
	if got.Status.State != valkeyv1.StateInitializing {
		t.Errorf("status.state of a new cluster is %q, want the CRD default Initializing", got.Status.State)
	}
}

// expectAdmission checks the API server's answer: accepted when want is empty, otherwise
// refused as Invalid with want in the message.
func expectAdmission(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want != "" && err == nil:
		t.Errorf("accepted, want refusal %q", want)
	case want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want)):
		t.Errorf("refused with %v, want Invalid containing %q", err, want)
	}
}

// TestUpstreamManifestsApplyUnchanged: manifests in valkey-io/valkey-operator's shapes and
// our sample are accepted with strict field validation, and every field they set is stored
// as written (nothing pruned or rewritten; only defaults added).
func TestUpstreamManifestsApplyUnchanged(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	paths := []string{"testdata/upstream-full.yaml", "testdata/upstream-tls.yaml", "testdata/upstream-legacy.yaml", "../../../../deploy/samples/valkey.yaml", "../../../../deploy/samples/valkey-users.yaml"}
	// Our copies of every sample in upstream's config/samples.
	samples, err := filepath.Glob("testdata/upstream-samples/*.yaml")
	if err != nil || len(samples) < 10 {
		t.Fatalf("upstream samples %v (%v), want 10", samples, err)
	}
	for _, path := range append(paths, samples...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			for _, sent := range readManifests(t, path) {
				if sent.GetKind() != "ValkeyCluster" {
					continue // the users sample's password Secret
				}
				sent.SetNamespace(ns)
				obj := sent.DeepCopy()
				if err := env.Client.Create(context.Background(), obj, client.FieldValidation("Strict")); err != nil {
					t.Fatalf("creating %s %s: %v", sent.GetKind(), sent.GetName(), err)
				}
				stored := &unstructured.Unstructured{}
				stored.SetGroupVersionKind(sent.GroupVersionKind())
				if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), stored); err != nil {
					t.Fatal(err)
				}
				for _, diff := range missingFrom(sent.Object["spec"], stored.Object["spec"], "spec") {
					t.Errorf("%s: %s", sent.GetName(), diff)
				}
				// The typed client reads it back too: the Go types hold every field.
				typed := &valkeyv1.ValkeyCluster{}
				if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), typed); err != nil {
					t.Fatalf("typed read: %v", err)
				}
				if int64(typed.Spec.Shards) != stored.Object["spec"].(map[string]any)["shards"].(int64) {
					t.Errorf("typed shards %d, stored %v", typed.Spec.Shards, stored.Object["spec"])
				}
			}
		})
	}
}

// missingFrom lists the leaves of sent that are absent or different in stored.
func missingFrom(sent, stored any, path string) []string {
	switch s := sent.(type) {
	case map[string]any:
		m, ok := stored.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: stored as %T, sent an object", path, stored)}
		}
		var out []string
		for k, v := range s {
			out = append(out, missingFrom(v, m[k], path+"."+k)...)
		}
		return out
	case []any:
		l, ok := stored.([]any)
		if !ok || len(l) != len(s) {
			return []string{fmt.Sprintf("%s: stored %v, sent %v", path, stored, sent)}
		}
		var out []string
		for i := range s {
			out = append(out, missingFrom(s[i], l[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(sent, stored) {
			return []string{fmt.Sprintf("%s: stored %v (%T), sent %v (%T)", path, stored, stored, sent, sent)}
		}
		return nil
	}
}

func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---") {
		// Through JSON with apimachinery's decoder, so whole numbers are int64 as the API
		// server returns them.
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj := map[string]any{}
		if err := utiljson.Unmarshal(js, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no manifest", path)
	}
	return out
}

// TestKubectlShowsSummary: kubectl prints the summary columns (not conditions[0]), the
// short names and the opsuite category work, and a new cluster reads Initializing before
// any controller wrote status.
func TestKubectlShowsSummary(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl not found in %s: run `make controlplane`", bin)
	}
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	c := validCluster(ns)
	c.Name = "shown"
	n := validNode(ns)
	n.Name = "shown-1-0"
	for _, obj := range []client.Object{c, n} {
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	// It serves shard 2 though named for shard 1 (a replica attached to shard 2's primary):
	// SHARD shows the served one.
	n.Status = valkeyv1.ValkeyNodeStatus{Role: valkeyv1.RoleReplica, Ready: true, PodName: "shown-1-0-0", Shard: ptr.To[int32](2)}
	if err := env.Client.Status().Update(context.Background(), n); err != nil {
		t.Fatalf("status update: %v", err)
	}
	kubeconfig := env.Kubeconfig(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	got := strings.Fields(run("get", "vkc", "shown"))
	// REASON and LAST FAILOVER are empty before the first status write, so the row has no
	// field for them: 3 shards desired, 0 ready.
	want := []string{"NAME", "STATE", "REASON", "SHARDS", "READY", "SHARDS", "LAST", "FAILOVER", "AGE", "shown", "Initializing", "3", "0"}
	if len(got) != len(want)+1 || !reflect.DeepEqual(got[:len(want)], want) {
		t.Errorf("kubectl get vkc printed %q, want %v then <age>", got, want)
	}
	got = strings.Fields(run("get", "vkn", "shown-1-0"))
	want = []string{"NAME", "ROLE", "SHARD", "READY", "AGE", "shown-1-0", "replica", "2", "true"}
	if len(got) != len(want)+1 || !reflect.DeepEqual(got[:len(want)], want) {
		t.Errorf("kubectl get vkn printed %q, want %v then <age>", got, want)
	}
	// The CRDs carry full Pod schemas (affinity, containers); kubectl's client-side apply
	// stores the whole object in an annotation, limited to 256 KiB. A dry run on the server
	// checks they still fit, so `kubectl apply -f deploy/crds` keeps working.
	for _, crd := range []string{"valkey.io_valkeyclusters.yaml", "valkey.io_valkeynodes.yaml"} {
		run("apply", "--dry-run=server", "-f", filepath.Join("..", "..", "..", "..", "deploy", "crds", crd))
	}
	if out := run("get", "opsuite", "-o", "name"); !strings.Contains(out, "valkeycluster.valkey.io/shown") || !strings.Contains(out, "valkeynode.valkey.io/shown-1-0") {
		t.Errorf("kubectl get opsuite lists %q, want both kinds", out)
	}
}

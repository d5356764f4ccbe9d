package validation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const repoRoot = "../../../.."

func minimal(ns string) *memgraphv1.MemgraphCluster {
	return &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "mgc-" + rand.String(5), Namespace: ns},
		Spec:       memgraphv1.MemgraphClusterSpec{Secrets: memgraphv1.SecretsSpec{Name: "license"}},
	}
}

// verdict fails t unless err is the API server's answer want asks for: accepted when want
// is empty, else refused as Invalid with want in the message.
func verdict(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Errorf("accepted, want a refusal containing %q", want)
		return
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("refused with %v\nwant Invalid containing %q", err, want)
	}
}

// TestCreateRules: every creation rule refuses its case with its message; edge cases that
// are valid (one data instance, a registry with a port, a digest) are accepted.
func TestCreateRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	type mgc = memgraphv1.MemgraphCluster
	cases := []struct {
		name   string
		mutate func(*mgc)
		want   string // "" accepts
	}{
		{name: "minimal", mutate: func(*mgc) {}},
		{name: "five coordinators, one data instance", mutate: func(c *mgc) { c.Spec.Coordinators, c.Spec.DataInstances = 5, 1 }},
		{name: "even coordinators", mutate: func(c *mgc) { c.Spec.Coordinators = 4 },
			want: "coordinators must be an odd number of at least 3"},
		{name: "one coordinator", mutate: func(c *mgc) { c.Spec.Coordinators = 1 },
			want: "coordinators must be an odd number of at least 3"},
		{name: "negative coordinators", mutate: func(c *mgc) { c.Spec.Coordinators = -3 },
			want: "coordinators must be an odd number of at least 3"},
		{name: "no data instances", mutate: func(c *mgc) { c.Spec.DataInstances = -1 },
			want: "dataInstances must be at least 1"},
		{name: "tag in repository", mutate: func(c *mgc) { c.Spec.Image.Repository = "memgraph/memgraph:3.12.0" },
			want: "image.repository must not carry a tag or digest: move it to image.tag or image.digest"},
		{name: "digest in repository", mutate: func(c *mgc) {
			c.Spec.Image.Repository = "memgraph/memgraph@sha256:" + strings.Repeat("a", 64)
		}, want: "image.repository must not carry a tag or digest"},
		{name: "tag in repository behind a registry port", mutate: func(c *mgc) { c.Spec.Image.Repository = "registry:5000/memgraph:3.12.0" },
			want: "image.repository must not carry a tag or digest"},
		{name: "registry with a port", mutate: func(c *mgc) { c.Spec.Image.Repository = "registry.local:5000/memgraph/memgraph" }},
		{name: "repository in capitals", mutate: func(c *mgc) { c.Spec.Image.Repository = "Memgraph/Memgraph" },
			want: "image.repository must be an image reference"},
		{name: "tag with a slash", mutate: func(c *mgc) { c.Spec.Image.Tag = "3.12/0" },
			want: "image.tag must be a tag such as 3.12.0"},
		{name: "short digest", mutate: func(c *mgc) { c.Spec.Image.Digest = "sha256:abc" },
			want: "image.digest must be sha256: followed by 64 lowercase hex digits"},
		{name: "digest", mutate: func(c *mgc) { c.Spec.Image.Digest = "sha256:" + strings.Repeat("0f", 32) }},
		{name: "pull policy", mutate: func(c *mgc) { c.Spec.Image.PullPolicy = "Sometimes" },
			want: `spec.image.pullPolicy: Unsupported value: "Sometimes"`},
		{name: "no license secret", mutate: func(c *mgc) { c.Spec.Secrets.Name = "" },
			want: "spec.secrets is required"},
		{name: "license secret name", mutate: func(c *mgc) { c.Spec.Secrets.Name = "My_License" },
			want: "secrets.name must name a Secret"},
		{name: "same license and organization key", mutate: func(c *mgc) {
			c.Spec.Secrets.LicenseKey, c.Spec.Secrets.OrganizationKey = "key", "key"
		}, want: "secrets.licenseKey and secrets.organizationKey must name different keys"},
		{name: "license key with a slash", mutate: func(c *mgc) { c.Spec.Secrets.LicenseKey = "a/b" },
			want: "secrets.licenseKey must be a Secret key"},
		{name: "organization key with a space", mutate: func(c *mgc) { c.Spec.Secrets.OrganizationKey = "org name" },
			want: "secrets.organizationKey must be a Secret key"},
		{name: "auth", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "memgraph-admin"} }},
		{name: "auth with keys", mutate: func(c *mgc) {
			c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "memgraph-admin", UserKey: "username", PasswordKey: "password"}
		}},
		{name: "no auth secret", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{} },
			want: "auth.secretName must name a Secret"},
		{name: "auth secret name", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "Admin_Secret"} },
			want: "auth.secretName must name a Secret"},
		{name: "same user and password key", mutate: func(c *mgc) {
			c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "a", UserKey: "k", PasswordKey: "k"}
		}, want: "auth.userKey and auth.passwordKey must name different keys of the Secret"},
		{name: "password key defaulted onto the user key", mutate: func(c *mgc) {
			c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "a", UserKey: "PASSWORD"}
		}, want: "auth.userKey and auth.passwordKey must name different keys of the Secret"},
		{name: "user key with a slash", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "a", UserKey: "a/b"} },
			want: "auth.userKey must be a Secret key"},
		{name: "password key with a space", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "a", PasswordKey: "pass word"} },
			want: "auth.passwordKey must be a Secret key"},
		{name: "cluster domain", mutate: func(c *mgc) { c.Spec.ClusterDomain = "Cluster_Local" },
			want: "clusterDomain must be a DNS domain such as cluster.local"},
		{name: "port out of range", mutate: func(c *mgc) { c.Spec.Ports.Bolt = 70000 },
			want: "spec.ports.bolt: Invalid value"},
		{name: "bolt and management on one port", mutate: func(c *mgc) { c.Spec.Ports.Management = 7687 },
			want: "must be five different ports"},
		{name: "replication on the coordinator port", mutate: func(c *mgc) { c.Spec.Ports.Replication = 12000 },
			want: "must be five different ports"},
		{name: "zero lib size", mutate: func(c *mgc) { c.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("0")) },
			want: "libPVCSize and logPVCSize must be positive quantities"},
		{name: "negative log size", mutate: func(c *mgc) { c.Spec.Storage.Coordinators.LogPVCSize = ptr.To(resource.MustParse("-1Gi")) },
			want: "libPVCSize and logPVCSize must be positive quantities"},
		{name: "read-only access mode", mutate: func(c *mgc) { c.Spec.Storage.Data.LibStorageAccessMode = "ReadOnlyMany" },
			want: `spec.storage.data.libStorageAccessMode: Unsupported value: "ReadOnlyMany"`},
		{name: "retention policy", mutate: func(c *mgc) { c.Spec.Storage.RetentionPolicy = "Recycle" },
			want: `spec.storage.retentionPolicy: Unsupported value: "Recycle"`},
		{name: "retention policy when scaled", mutate: func(c *mgc) { c.Spec.Storage.RetentionPolicyWhenScaled = ptr.To(memgraphv1.RetentionAction("Recycle")) },
			want: `spec.storage.retentionPolicyWhenScaled: Unsupported value: "Recycle"`},
		{name: "priority class with capitals", mutate: func(c *mgc) { c.Spec.PriorityClassName.Data = "High_Priority" },
			want: "priorityClassName must name a PriorityClass"},
		{name: "zero grace period for data instances", mutate: func(c *mgc) { c.Spec.TerminationGracePeriodSeconds.Data = ptr.To[int64](0) },
			want: "terminationGracePeriodSeconds.data must be between 1 and 86400 seconds: 0 kills Memgraph before it writes its snapshot on exit"},
		{name: "day-long coordinator grace period", mutate: func(c *mgc) { c.Spec.TerminationGracePeriodSeconds.Coordinators = ptr.To[int64](86401) },
			want: "terminationGracePeriodSeconds.coordinators must be between 1 and 86400 seconds"},
		{name: "node selector value", mutate: func(c *mgc) { c.Spec.NodeSelector.Data = map[string]memgraphv1.LabelValue{"pool": "not a value"} },
			want: "label values must be at most 63"},
		{name: "toleration without effect value", mutate: func(c *mgc) {
			c.Spec.Tolerations.Coordinators = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "graph", Effect: "Sometimes"}}
		}, want: "tolerations.coordinators[].effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		{name: "toleration Exists with a value", mutate: func(c *mgc) {
			c.Spec.Tolerations.Data = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "graph"}}
		}, want: "tolerations.data[] with operator Exists must have no value"},
		{name: "spread with zero skew", mutate: func(c *mgc) {
			c.Spec.TopologySpreadConstraints.Data = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, want: "topologySpreadConstraints.data[].maxSkew must be at least 1"},
		{name: "spread with an unknown policy", mutate: func(c *mgc) {
			c.Spec.TopologySpreadConstraints.Coordinators = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: "Sometimes"}}
		}, want: "topologySpreadConstraints.coordinators[].whenUnsatisfiable must be DoNotSchedule"},
		{name: "negative probe period", mutate: func(c *mgc) { c.Spec.Probes.Data.Liveness = &memgraphv1.ProbeTimings{PeriodSeconds: -1} },
			want: "spec.probes.data.liveness.periodSeconds: Invalid value"},
		{name: "env name starting with a digit", mutate: func(c *mgc) {
			c.Spec.ExtraEnv.Data = []memgraphv1.EnvVar{{Name: "1ST", Value: "x"}}
		}, want: "extraEnv names must be environment variable names"},
		{name: "env listed twice", mutate: func(c *mgc) {
			c.Spec.ExtraEnv.Coordinators = []memgraphv1.EnvVar{{Name: "A"}, {Name: "A"}}
		}, want: "spec.extraEnv.coordinators[1]: Duplicate value"},
		{name: "request above limit", mutate: func(c *mgc) {
			c.Spec.Resources.Data = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			}
		}, want: "resources.data.requests must not exceed resources.data.limits"},
		{name: "coordinator cpu request above limit", mutate: func(c *mgc) {
			c.Spec.Resources.Coordinators = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			}
		}, want: "resources.coordinators.requests must not exceed resources.coordinators.limits"},
		{name: "selector label", mutate: func(c *mgc) {
			c.Spec.Labels.Data = map[string]memgraphv1.LabelValue{"app.kubernetes.io/instance": "other"}
		}, want: "labels must not set app.kubernetes.io/name, instance, component or managed-by, memgraph.com/cluster"},
		{name: "cluster selector label", mutate: func(c *mgc) {
			c.Spec.Labels.Coordinators = map[string]memgraphv1.LabelValue{"memgraph.com/cluster": "other"}
		}, want: "the operator selects its pods by them"},
		{name: "pod-index label", mutate: func(c *mgc) {
			c.Spec.Labels.Coordinators = map[string]memgraphv1.LabelValue{"apps.kubernetes.io/pod-index": "1"}
		}, want: "a coordinator's id is its pod-index"},
		{name: "operator annotation", mutate: func(c *mgc) {
			c.Spec.Annotations.Data = map[string]string{"memgraph.com/role-assigned": "true"}
		}, want: "annotations must not use keys under memgraph.com/"},
		{name: "pod annotations", mutate: func(c *mgc) {
			c.Spec.Annotations.Data = map[string]string{"example.com/backup": "daily", "prometheus.io/scrape": "true"}
			c.Spec.Annotations.Coordinators = map[string]string{"sidecar.istio.io/inject": "false", "note": "a longer value, with spaces: fine"}
		}},
		{name: "label value with a space", mutate: func(c *mgc) {
			c.Spec.Labels.Coordinators = map[string]memgraphv1.LabelValue{"team": "graph db"}
		}, want: "label values must be at most 63 letters"},
		{name: "prefixed and empty labels", mutate: func(c *mgc) {
			c.Spec.Labels.Data = map[string]memgraphv1.LabelValue{"example.com/team": "graph", "app.kubernetes.io/part-of": "shop", "flag": ""}
		}},
		{name: "tuning env and args", mutate: func(c *mgc) {
			c.Spec.ExtraEnv.Data = []memgraphv1.EnvVar{{Name: "MEMGRAPH_LOG_LEVEL", Value: "DEBUG"}}
			c.Spec.ExtraArgs.Data = []memgraphv1.Arg{"--log-level=DEBUG", "--storage-wal-file-size-kib", "20480", "--bolt-port-x=1"}
			c.Spec.ExtraArgs.Coordinators = []memgraphv1.Arg{"--also-log-to-stderr"}
		}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { verdict(t, env.Client.Create(ctx, edited(ns, tc.mutate)), tc.want) })
	}
}

// edited is a minimal cluster in ns changed by mutate.
func edited(ns string, mutate func(*memgraphv1.MemgraphCluster)) *memgraphv1.MemgraphCluster {
	c := minimal(ns)
	mutate(c)
	return c
}

// TestReservedEnvAndFlags: each variable and flag the operator sets is refused in both
// roles, in every spelling memgraph accepts, with a message naming what to use instead.
func TestReservedEnvAndFlags(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	envMessage := map[string]string{
		"MEMGRAPH_ENTERPRISE_LICENSE": "the license comes from the Secret named in spec.license",
		"MEMGRAPH_ORGANIZATION_NAME":  "the license comes from the Secret named in spec.license",
		"MEMGRAPH_BOLT_PORT":          "set spec.ports instead",
		"MEMGRAPH_MANAGEMENT_PORT":    "set spec.ports instead",
		"MEMGRAPH_COORDINATOR_PORT":   "set spec.ports instead",
		"MEMGRAPH_USER":               "name a Secret in spec.auth instead",
		"MEMGRAPH_PASSWORD":           "name a Secret in spec.auth instead",
	}
	for _, name := range memgraphv1.ReservedEnv {
		want, ok := envMessage[name]
		if !ok {
			want = "the operator derives each pod's identity and registration from its ordinal"
		}
		for _, role := range []string{"coordinators", "data"} {
			t.Run(role+"/"+name, func(t *testing.T) {
				c := minimal(ns)
				vars := []memgraphv1.EnvVar{{Name: "OK", Value: "1"}, {Name: name, Value: "x"}}
				if role == "data" {
					c.Spec.ExtraEnv.Data = vars
				} else {
					c.Spec.ExtraEnv.Coordinators = vars
				}
				verdict(t, env.Client.Create(context.Background(), c), want)
			})
		}
	}
	flagMessage := map[string]string{
		"bolt-port": "set the port there", "management-port": "set the port there", "coordinator-port": "set the port there",
		"license-key": "the license comes from the Secret named in spec.license", "organization-name": "the license comes from the Secret named in spec.license",
		"bolt-cert-file": "name a kubernetes.io/tls Secret in spec.tls.bolt.secretName instead", "bolt-key-file": "name a kubernetes.io/tls Secret in spec.tls.bolt.secretName instead",
	}
	for _, flag := range memgraphv1.ReservedFlags {
		want, ok := flagMessage[flag]
		if !ok {
			want = "the operator derives each coordinator's identity from its pod ordinal"
		}
		for i, arg := range []string{"--" + flag + "=7", "-" + flag + "=7", "--" + flag} {
			c := minimal(ns)
			args := []memgraphv1.Arg{"--log-level=INFO", memgraphv1.Arg(arg), "7"}
			if i%2 == 0 {
				c.Spec.ExtraArgs.Coordinators = args
			} else {
				c.Spec.ExtraArgs.Data = args
			}
			t.Run(arg, func(t *testing.T) { verdict(t, env.Client.Create(context.Background(), c), want) })
		}
	}
}

// TestUpdateRules: what would lose data or strand registrations is refused on update;
// scaling, growing volumes and changing the retention policy are not.
func TestUpdateRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	type mgc = memgraphv1.MemgraphCluster
	cases := []struct {
		name   string
		mutate func(*mgc)
		want   string
	}{
		{name: "scale both roles", mutate: func(c *mgc) { c.Spec.Coordinators, c.Spec.DataInstances = 5, 1 }},
		{name: "grow volumes, change retention and tuning", mutate: func(c *mgc) {
			c.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("10Gi"))
			c.Spec.Storage.Coordinators.LogPVCSize = ptr.To(resource.MustParse("1Gi"))
			c.Spec.Storage.RetentionPolicy = memgraphv1.RetentionDelete
			c.Spec.Storage.RetentionPolicyWhenScaled = ptr.To(memgraphv1.RetentionRetain)
			c.Spec.Image.Tag = "3.12.1"
			c.Spec.ExtraArgs.Data = []memgraphv1.Arg{"--log-level=TRACE"}
		}},
		{name: "even coordinators on update", mutate: func(c *mgc) { c.Spec.Coordinators = 4 },
			want: "coordinators must be an odd number of at least 3"},
		{name: "shrink the lib volume", mutate: func(c *mgc) { c.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("512Mi")) },
			want: "libPVCSize and logPVCSize can only grow"},
		{name: "shrink the coordinators' log volume", mutate: func(c *mgc) {
			c.Spec.Storage.Coordinators.LogPVCSize = ptr.To(resource.MustParse("128Mi"))
		}, want: "libPVCSize and logPVCSize can only grow"},
		{name: "change the lib storage class", mutate: func(c *mgc) { c.Spec.Storage.Data.LibStorageClassName = ptr.To("other") },
			want: "libStorageClassName and logStorageClassName are immutable"},
		{name: "drop the lib storage class", mutate: func(c *mgc) { c.Spec.Storage.Data.LibStorageClassName = nil },
			want: "libStorageClassName and logStorageClassName are immutable"},
		{name: "set a log storage class", mutate: func(c *mgc) { c.Spec.Storage.Coordinators.LogStorageClassName = ptr.To("fast") },
			want: "libStorageClassName and logStorageClassName are immutable"},
		{name: "change the access mode", mutate: func(c *mgc) { c.Spec.Storage.Data.LogStorageAccessMode = "ReadWriteOncePod" },
			want: "libStorageAccessMode and logStorageAccessMode are immutable"},
		{name: "change a port", mutate: func(c *mgc) { c.Spec.Ports.Management = 10001 },
			want: "ports are immutable"},
		{name: "change the cluster domain", mutate: func(c *mgc) { c.Spec.ClusterDomain = "example.org" },
			want: "clusterDomain is immutable"},
		// Adding auth rolls the pods onto a login; the users live in Memgraph's data.
		{name: "add auth", mutate: func(c *mgc) { c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "admin"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := minimal(ns)
			c.Spec.Storage.Data.LibStorageClassName = ptr.To("standard")
			if err := env.Client.Create(ctx, c); err != nil {
				t.Fatalf("creating: %v", err)
			}
			tc.mutate(c)
			verdict(t, env.Client.Update(ctx, c), tc.want)
		})
	}
	t.Run("remove auth", func(t *testing.T) {
		ctx := context.Background()
		c := minimal(ns)
		c.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "admin"}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatalf("creating: %v", err)
		}
		c.Spec.Auth.PasswordKey = "pw"
		if err := env.Client.Update(ctx, c); err != nil {
			t.Fatalf("changing a key: %v", err)
		}
		c.Spec.Auth = nil
		verdict(t, env.Client.Update(ctx, c), "spec.auth cannot be removed: Memgraph keeps the admin user in its data")
	})
}

// defaulted is the spec a minimal manifest must come back with, built from the Go
// constants the builders fall back to.
func defaulted(secret string) memgraphv1.MemgraphClusterSpec {
	role := memgraphv1.RoleStorage{
		LibPVCSize: ptr.To(resource.MustParse(memgraphv1.DefaultLibPVCSize)), LibStorageAccessMode: memgraphv1.DefaultAccessMode,
		LogPVCSize: ptr.To(resource.MustParse(memgraphv1.DefaultLogPVCSize)), LogStorageAccessMode: memgraphv1.DefaultAccessMode,
	}
	probes := memgraphv1.Probes{
		Liveness: ptr.To(memgraphv1.DefaultLivenessProbe), Readiness: ptr.To(memgraphv1.DefaultReadinessProbe), Startup: ptr.To(memgraphv1.DefaultStartupProbe),
	}
	return memgraphv1.MemgraphClusterSpec{
		Coordinators:  memgraphv1.DefaultCoordinators,
		DataInstances: memgraphv1.DefaultDataInstances,
		Image: memgraphv1.ImageSpec{
			Repository: memgraphv1.DefaultImageRepository, Tag: memgraphv1.DefaultImageTag, PullPolicy: memgraphv1.DefaultImagePullPolicy,
		},
		Secrets: memgraphv1.SecretsSpec{
			Name: secret, LicenseKey: memgraphv1.DefaultLicenseKey, OrganizationKey: memgraphv1.DefaultOrganizationKey,
		},
		Storage: memgraphv1.StorageSpec{
			RetentionPolicy: memgraphv1.DefaultRetention,
			Coordinators:    role, Data: role,
		},
		TerminationGracePeriodSeconds: memgraphv1.RoleTerminationGracePeriod{
			Coordinators: ptr.To(memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds),
			Data:         ptr.To(memgraphv1.DefaultDataTerminationGracePeriodSeconds),
		},
		ClusterDomain: memgraphv1.DefaultClusterDomain,
		Ports: memgraphv1.PortsSpec{
			Bolt: memgraphv1.DefaultBoltPort, Management: memgraphv1.DefaultManagementPort, Coordinator: memgraphv1.DefaultCoordinatorPort,
			Replication: memgraphv1.DefaultReplicationPort, Metrics: memgraphv1.DefaultMetricsPort,
		},
		Probes:      memgraphv1.RoleProbes{Coordinators: probes, Data: probes},
		Replication: memgraphv1.ReplicationSpec{Mode: memgraphv1.DefaultReplicationMode},
		CoordinatorSettings: memgraphv1.CoordinatorSettings{
			InstanceDownTimeoutSec:          memgraphv1.DefaultInstanceDownTimeoutSec,
			InstanceHealthCheckFrequencySec: memgraphv1.DefaultInstanceHealthCheckFrequencySec,
			SyncFailoverOnly:                ptr.To(memgraphv1.DefaultSyncFailoverOnly),
		},
	}
}

// TestDefaultsMatchConstants: the API server fills a minimal manifest with exactly the
// values of the Go constants, and a new cluster reads Initializing before any status write.
func TestDefaultsMatchConstants(t *testing.T) {
	ctx := context.Background()
	c := minimal(testenv.NewNamespace(t, env.Client, "mgc-"))
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := &memgraphv1.MemgraphCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if want := defaulted("license"); !equality.Semantic.DeepEqual(got.Spec, want) {
		t.Errorf("defaulted spec\n got %+v\nwant %+v", got.Spec, want)
	}
	// spec.auth is optional (absent above); once named, its keys default too.
	a := minimal(c.Namespace)
	a.Name = c.Name + "-auth"
	a.Spec.Auth = &memgraphv1.AuthSpec{SecretName: "admin"}
	if err := env.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	if want := (memgraphv1.AuthSpec{SecretName: "admin", UserKey: memgraphv1.DefaultAuthUserKey, PasswordKey: memgraphv1.DefaultAuthPasswordKey}); a.Spec.Auth == nil || *a.Spec.Auth != want {
		t.Errorf("defaulted auth %+v, want %+v", a.Spec.Auth, want)
	}
	if got.Status.State != memgraphv1.DefaultInitialState {
		t.Errorf("status.state of a new cluster is %q, want %q", got.Status.State, memgraphv1.DefaultInitialState)
	}
}

// TestCRDFileDefaults reads the generated CRD itself (what users install), so a default
// edited in the markers without its constant, or a stale CRD, fails here.
func TestCRDFileDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "crds", "memgraph.com_memgraphclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	spec := dig(t, crd, "spec", "versions", "0", "schema", "openAPIV3Schema", "properties", "spec", "properties")
	def := func(path ...string) any {
		node := dig(t, spec, path...)
		v, ok := node.(map[string]any)["default"]
		if !ok {
			t.Errorf("%s has no default in the CRD", strings.Join(path, "."))
		}
		return v
	}
	str := func(v any) string { s, _ := v.(string); return s }
	num := func(v any) int32 { f, _ := v.(float64); return int32(f) }
	type check struct {
		path      []string
		got, want any
	}
	checks := []check{
		{[]string{"coordinators"}, num(def("coordinators")), memgraphv1.DefaultCoordinators},
		{[]string{"dataInstances"}, num(def("dataInstances")), memgraphv1.DefaultDataInstances},
		{[]string{"image.repository"}, str(def("image", "properties", "repository")), memgraphv1.DefaultImageRepository},
		{[]string{"image.tag"}, str(def("image", "properties", "tag")), memgraphv1.DefaultImageTag},
		{[]string{"image.pullPolicy"}, str(def("image", "properties", "pullPolicy")), memgraphv1.DefaultImagePullPolicy},
		{[]string{"secrets.licenseKey"}, str(def("secrets", "properties", "licenseKey")), memgraphv1.DefaultLicenseKey},
		{[]string{"secrets.organizationKey"}, str(def("secrets", "properties", "organizationKey")), memgraphv1.DefaultOrganizationKey},
		{[]string{"auth.userKey"}, str(def("auth", "properties", "userKey")), memgraphv1.DefaultAuthUserKey},
		{[]string{"auth.passwordKey"}, str(def("auth", "properties", "passwordKey")), memgraphv1.DefaultAuthPasswordKey},
		{[]string{"clusterDomain"}, str(def("clusterDomain")), memgraphv1.DefaultClusterDomain},
		{[]string{"ports.bolt"}, num(def("ports", "properties", "bolt")), memgraphv1.DefaultBoltPort},
		{[]string{"ports.management"}, num(def("ports", "properties", "management")), memgraphv1.DefaultManagementPort},
		{[]string{"ports.coordinator"}, num(def("ports", "properties", "coordinator")), memgraphv1.DefaultCoordinatorPort},
		{[]string{"ports.replication"}, num(def("ports", "properties", "replication")), memgraphv1.DefaultReplicationPort},
		{[]string{"ports.metrics"}, num(def("ports", "properties", "metrics")), memgraphv1.DefaultMetricsPort},
		{[]string{"storage.retentionPolicy"}, str(def("storage", "properties", "retentionPolicy")), string(memgraphv1.DefaultRetention)},
		{[]string{"terminationGracePeriodSeconds.coordinators"}, int64(num(def("terminationGracePeriodSeconds", "properties", "coordinators"))), memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds},
		{[]string{"replication.mode"}, str(def("replication", "properties", "mode")), string(memgraphv1.DefaultReplicationMode)},
		{[]string{"coordinatorSettings.instanceDownTimeoutSec"}, num(def("coordinatorSettings", "properties", "instanceDownTimeoutSec")), memgraphv1.DefaultInstanceDownTimeoutSec},
		{[]string{"coordinatorSettings.instanceHealthCheckFrequencySec"}, num(def("coordinatorSettings", "properties", "instanceHealthCheckFrequencySec")), memgraphv1.DefaultInstanceHealthCheckFrequencySec},
		{[]string{"coordinatorSettings.syncFailoverOnly"}, def("coordinatorSettings", "properties", "syncFailoverOnly"), memgraphv1.DefaultSyncFailoverOnly},
		{[]string{"terminationGracePeriodSeconds.data"}, int64(num(def("terminationGracePeriodSeconds", "properties", "data"))), memgraphv1.DefaultDataTerminationGracePeriodSeconds},
	}
	for _, role := range []string{"coordinators", "data"} {
		at := func(field string) []string { return []string{"storage", "properties", role, "properties", field} }
		checks = append(checks,
			check{at("libPVCSize"), str(def(at("libPVCSize")...)), memgraphv1.DefaultLibPVCSize},
			check{at("logPVCSize"), str(def(at("logPVCSize")...)), memgraphv1.DefaultLogPVCSize},
			check{at("libStorageAccessMode"), str(def(at("libStorageAccessMode")...)), string(memgraphv1.DefaultAccessMode)},
			check{at("logStorageAccessMode"), str(def(at("logStorageAccessMode")...)), string(memgraphv1.DefaultAccessMode)},
		)
		for probe, want := range map[string]memgraphv1.ProbeTimings{
			"liveness": memgraphv1.DefaultLivenessProbe, "readiness": memgraphv1.DefaultReadinessProbe, "startup": memgraphv1.DefaultStartupProbe,
		} {
			d, _ := def("probes", "properties", role, "properties", probe).(map[string]any)
			got := memgraphv1.ProbeTimings{
				InitialDelaySeconds: num(d["initialDelaySeconds"]), PeriodSeconds: num(d["periodSeconds"]),
				TimeoutSeconds: num(d["timeoutSeconds"]), FailureThreshold: num(d["failureThreshold"]),
			}
			checks = append(checks, check{[]string{"probes", role, probe}, got, want})
		}
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("CRD default of %s is %v, Go constant %v", strings.Join(c.path, "."), c.got, c.want)
		}
	}
}

// dig walks maps by key and lists by index, failing t on a missing step.
func dig(t *testing.T, node any, path ...string) any {
	t.Helper()
	for i, step := range path {
		switch n := node.(type) {
		case map[string]any:
			node = n[step]
		case []any:
			if step != "0" || len(n) == 0 {
				t.Fatalf("CRD path %s: list step %q", strings.Join(path[:i+1], "."), step)
			}
			node = n[0]
		default:
			node = nil
		}
		if node == nil {
			t.Fatalf("CRD has no %s", strings.Join(path[:i+1], "."))
		}
	}
	return node
}

// full sets every field of the spec to a value other than its default, so what the API
// server stores can be compared with what was sent field for field.
func full(ns string) *memgraphv1.MemgraphCluster {
	probe := memgraphv1.ProbeTimings{InitialDelaySeconds: 3, PeriodSeconds: 7, TimeoutSeconds: 4, FailureThreshold: 9}
	probes := memgraphv1.Probes{Liveness: &probe, Readiness: ptr.To(probe), Startup: ptr.To(probe)}
	role := memgraphv1.RoleStorage{
		LibPVCSize: ptr.To(resource.MustParse("20Gi")), LibStorageClassName: ptr.To("fast"), LibStorageAccessMode: "ReadWriteOncePod",
		LogPVCSize: ptr.To(resource.MustParse("2Gi")), LogStorageClassName: ptr.To("standard"), LogStorageAccessMode: "ReadWriteMany",
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	return &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 5, DataInstances: 3,
			Image: memgraphv1.ImageSpec{
				Repository: "registry.local:5000/memgraph/memgraph", Tag: "3.12.1",
				Digest: "sha256:" + strings.Repeat("ab", 32), PullPolicy: corev1.PullAlways,
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
			Secrets:          memgraphv1.SecretsSpec{Name: "mg-license", LicenseKey: "license", OrganizationKey: "organization"},
			TLS:              &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: "bolt-tls"}},
			Storage: memgraphv1.StorageSpec{
				RetentionPolicy:           memgraphv1.RetentionRetain,
				RetentionPolicyWhenScaled: ptr.To(memgraphv1.RetentionDelete),
				Coordinators:              role, Data: role,
			},
			Replication: memgraphv1.ReplicationSpec{Mode: memgraphv1.ReplicationStrictSync,
				Instances: []memgraphv1.InstanceReplication{{Ordinal: 2, Mode: memgraphv1.ReplicationAsync}}},
			CoordinatorSettings: memgraphv1.CoordinatorSettings{InstanceDownTimeoutSec: 7, InstanceHealthCheckFrequencySec: 2,
				SyncFailoverOnly: ptr.To(false)},
			ClusterDomain: "k8s.example.org",
			Ports:         memgraphv1.PortsSpec{Bolt: 7688, Management: 10001, Coordinator: 12001, Replication: 20001, Metrics: 9092},
			Probes:        memgraphv1.RoleProbes{Coordinators: probes, Data: probes},
			Resources:     memgraphv1.RoleResources{Coordinators: res, Data: res},
			Labels: memgraphv1.RoleLabels{
				Coordinators: map[string]memgraphv1.LabelValue{"team": "graph", "tier": "raft"}, Data: map[string]memgraphv1.LabelValue{"team": "graph"},
			},
			ExtraEnv: memgraphv1.RoleEnv{
				Coordinators: []memgraphv1.EnvVar{{Name: "TZ", Value: "UTC"}},
				Data:         []memgraphv1.EnvVar{{Name: "MEMGRAPH_LOG_LEVEL", Value: "DEBUG"}, {Name: "EMPTY"}},
			},
			ExtraArgs: memgraphv1.RoleArgs{
				Coordinators: []memgraphv1.Arg{"--log-level=DEBUG"},
				Data:         []memgraphv1.Arg{"--storage-snapshot-interval-sec=300", "--query-execution-timeout-sec", "600"},
			},
			Affinity: memgraphv1.RoleAffinity{
				Data: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"r6i.2xlarge"},
					}}}},
				}}},
				Coordinators: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "coordinator"}},
					TopologyKey:   "kubernetes.io/hostname",
				}}}},
			},
			NodeSelector: memgraphv1.RoleNodeSelector{
				Coordinators: map[string]memgraphv1.LabelValue{"role": "coordinator-node"}, Data: map[string]memgraphv1.LabelValue{"role": "data-node"},
			},
			Tolerations: memgraphv1.RoleTolerations{
				Data: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "memgraph", Effect: corev1.TaintEffectNoSchedule}},
			},
			TopologySpreadConstraints: memgraphv1.RoleTopologySpreadConstraints{
				Data: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}},
			},
			PriorityClassName: memgraphv1.RolePriorityClassName{Coordinators: "system-cluster-critical", Data: "memgraph-data"},
			TerminationGracePeriodSeconds: memgraphv1.RoleTerminationGracePeriod{
				Coordinators: ptr.To[int64](60), Data: ptr.To[int64](3600),
			},
		},
	}
}

// TestManifestsAccepted: the sample (decoded strictly, so an unknown field fails) and a
// manifest setting every field are accepted with strict field validation; every field of
// the full one is stored exactly as sent.
func TestManifestsAccepted(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "mgc-")

	sent := full(ns)
	if err := env.Client.Create(ctx, sent.DeepCopy(), client.FieldValidation("Strict")); err != nil {
		t.Fatalf("full manifest refused: %v", err)
	}
	stored := &memgraphv1.MemgraphCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sent), stored); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(stored.Spec, sent.Spec) {
		t.Errorf("full manifest stored as\n%+v\nsent\n%+v", stored.Spec, sent.Spec)
	}

	found := 0
	for _, doc := range documents(t, filepath.Join(repoRoot, "deploy", "samples", "memgraph.yaml")) {
		meta := metav1.TypeMeta{}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "MemgraphCluster" {
			continue // the license Secret
		}
		found++
		c := &memgraphv1.MemgraphCluster{}
		if err := yaml.UnmarshalStrict(doc, c); err != nil {
			t.Fatalf("sample does not decode strictly into the Go types: %v", err)
		}
		c.Namespace = ns
		if err := env.Client.Create(ctx, c, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("sample refused: %v", err)
		}
		if c.Spec.Coordinators != 3 || c.Spec.DataInstances != 2 || c.Spec.Secrets.Name == "" {
			t.Errorf("sample declares %d coordinators, %d data instances, license %q; want 3, 2 and a Secret",
				c.Spec.Coordinators, c.Spec.DataInstances, c.Spec.Secrets.Name)
		}
	}
	if found != 1 {
		t.Errorf("deploy/samples/memgraph.yaml holds %d MemgraphClusters, want 1", found)
	}
}

func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}

// TestKubectlColumns: kubectl prints the state, the declared counts, the MAIN, the
// leader and the last failover (the registered counts with -o wide), the short name and the opsuite category
// work, and a new cluster reads Initializing before any controller wrote status.
func TestKubectlColumns(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// A missing kubectl fails the first get with its path (`make controlplane` builds it).
	kubectl := filepath.Join(bin, "kubectl")
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	c := minimal(ns)
	c.Name = "shown"
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.Kubeconfig(t)
	get := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "-n", ns, "get"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s get %v: %v\n%s", kubectl, args, err, out)
		}
		return strings.Fields(string(out))
	}
	expect := func(got, want []string) {
		t.Helper()
		// The last field is the age, which varies.
		if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) {
			t.Errorf("kubectl printed %q, want %v then <age>", got, want)
		}
	}
	// REASON, the READY counts, MAIN, LEADER and LAST FAILOVER are empty before the first
	// status write (REASON stays empty while Ready; the ready counts are omitted at 0), so
	// the row has no field for them.
	header := []string{"NAME", "STATE", "REASON", "COORDINATORS", "DATA", "READY", "COORDINATORS", "READY", "DATA", "MAIN", "LEADER", "LAST", "FAILOVER", "AGE"}
	expect(get("mgc", "shown"), append(slices.Clone(header), "shown", "Initializing", "3", "2"))

	// Ten hours ago prints as "10h" for the next 14 hours (kubectl's human durations).
	c.Status = memgraphv1.MemgraphClusterStatus{
		State: memgraphv1.StateReady, Coordinators: 3, DataInstances: 2, Main: "instance_0", Leader: "coordinator_1",
		LastFailoverTime: &metav1.Time{Time: time.Now().Add(-10 * time.Hour)},
	}
	if err := env.Client.Status().Update(ctx, c); err != nil {
		t.Fatalf("status update: %v", err)
	}
	expect(get("memgraphcluster", "shown"), append(slices.Clone(header), "shown", "Ready", "3", "2", "instance_0", "coordinator_1", "10h"))
	expect(get("mgc", "shown", "-o", "wide"), []string{
		"NAME", "STATE", "REASON", "COORDINATORS", "DATA", "READY", "COORDINATORS", "READY", "DATA", "MAIN", "LEADER", "LAST", "FAILOVER", "REGISTERED", "COORDINATORS", "REGISTERED", "DATA", "AGE",
		"shown", "Ready", "3", "2", "instance_0", "coordinator_1", "10h", "3", "2",
	})
	if got := get("opsuite", "-o", "name"); !slices.Contains(got, "memgraphcluster.memgraph.com/shown") {
		t.Errorf("kubectl get opsuite lists %q, want memgraphcluster.memgraph.com/shown", got)
	}
}

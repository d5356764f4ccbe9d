package validation

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// minimal is a cluster with nothing set but its name: the schema's defaults fill the rest.
func minimal(ns string) *veltrixv1.VeltrixCluster {
	return &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc-" + rand.String(5), Namespace: ns}}
}

// verdict says what is wrong with the API server's answer err, or "" when it is what want
// asks for: accepted when want is empty, otherwise refused as Invalid with want in it.
func verdict(err error, want string) string {
	if want == "" {
		if err != nil {
			return "refused: " + err.Error()
		}
		return ""
	}
	if err == nil {
		return "accepted, want a refusal containing " + want
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		return "refused with " + err.Error() + ", want Invalid containing " + want
	}
	return ""
}

// TestDefaultsMatchConstants: an empty spec is stored with the schema's defaults, and they
// are the exported constants the reconciler uses, so the two cannot drift apart.
func TestDefaultsMatchConstants(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	c := minimal(ns)
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := &veltrixv1.VeltrixCluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	want := veltrixv1.VeltrixClusterSpec{
		Size:                       veltrixv1.DefaultSize,
		Version:                    veltrixv1.DefaultVersion,
		Image:                      veltrixv1.DefaultImage,
		ReplicationFactor:          veltrixv1.DefaultReplicationFactor,
		StorageClassName:           veltrixv1.DefaultStorageClassName,
		DisksPerNode:               veltrixv1.DefaultDisksPerNode,
		DiskSelector:               veltrixv1.DiskSelector{NVMeOnly: ptr.To(veltrixv1.DefaultNVMeOnly)},
		ReclaimPolicy:              veltrixv1.DefaultReclaimPolicy,
		ServerPort:                 veltrixv1.DefaultServerPort,
		MetricsPort:                veltrixv1.DefaultMetricsPort,
		GossipPort:                 veltrixv1.DefaultGossipPort,
		RawVLog:                    veltrixv1.RawVLogSpec{XFSPartitionPercent: veltrixv1.DefaultXFSPartitionPercent},
		PodAntiAffinityTopologyKey: veltrixv1.DefaultPodAntiAffinityTopologyKey,
		Mode:                       veltrixv1.DefaultMode,
		Net:                        veltrixv1.DefaultNet,
		URingBridge:                veltrixv1.DefaultURingBridge,
		LostNodes:                  veltrixv1.LostNodesSpec{Replace: veltrixv1.DefaultLostNodeReplace},

		TerminationGracePeriodSeconds: ptr.To(veltrixv1.DefaultTerminationGracePeriodSeconds),
	}
	if !equality.Semantic.DeepEqual(got.Spec, want) {
		t.Errorf("defaulted spec\n got %+v\nwant %+v", got.Spec, want)
	}
}

// TestCreateRules: each rule refuses its case with its own message; the edge cases next to
// each rule are accepted.
func TestCreateRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	q := resource.MustParse
	secret := &veltrixv1.SecretKeyRef{Name: "auth", Key: "auth.yaml"}
	cases := []struct {
		name string
		spec func(*veltrixv1.VeltrixClusterSpec)
		want string // "" accepts
	}{
		{name: "defaults", spec: func(*veltrixv1.VeltrixClusterSpec) {}},
		{name: "lost nodes replaced automatically after 2m", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.LostNodes = veltrixv1.LostNodesSpec{Replace: veltrixv1.LostNodeReplaceAutomatic, GracePeriod: &metav1.Duration{Duration: 2 * time.Minute}}
		}},
		{name: "lost nodes grace period negative", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.LostNodes.GracePeriod = &metav1.Duration{Duration: -time.Second}
		}, want: "lostNodes.gracePeriod must be a duration between 0s and 168h"},
		{name: "lost nodes grace period above a week", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.LostNodes.GracePeriod = &metav1.Duration{Duration: 200 * time.Hour}
		}, want: "lostNodes.gracePeriod must be a duration between 0s and 168h"},
		{name: "lost nodes unknown policy", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.LostNodes.Replace = "Sometimes" },
			want: `spec.lostNodes.replace: Unsupported value: "Sometimes"`},
		{name: "size below replicationFactor", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Size, s.ReplicationFactor = 2, 3 },
			want: "size must be at least replicationFactor"},
		{name: "size equal to replicationFactor", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Size, s.ReplicationFactor = 1, 1 }},
		{name: "negative size", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Size = -1 },
			want: "spec.size: Invalid value: -1"},
		{name: "standalone with three members", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Mode = veltrixv1.ModeStandalone },
			want: "mode standalone runs one member without replication"},
		{name: "unknown mode", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Mode = "sharded" },
			want: `spec.mode: Unsupported value: "sharded"`},
		{name: "net cpp in replicated", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Net = veltrixv1.NetCPP },
			want: "net cpp, uring and poll are refused by the server in mode raft and replicated: set net to go"},
		{name: "net uring in raft", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Net, s.Mode = veltrixv1.NetURing, veltrixv1.ModeRaft },
			want: "refused by the server in mode raft and replicated"},
		{name: "net poll standalone with auth", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Size, s.ReplicationFactor, s.Mode, s.Net, s.AuthConfig = 1, 1, veltrixv1.ModeStandalone, veltrixv1.NetPoll, secret
		}, want: "net cpp, uring and poll are refused by the server with an auth config: set net to go, or remove authConfig"},
		{name: "net poll standalone without auth", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Size, s.ReplicationFactor, s.Mode, s.Net = 1, 1, veltrixv1.ModeStandalone, veltrixv1.NetPoll
		}},
		{name: "unknown net", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Net = "rdma" },
			want: `spec.net: Unsupported value: "rdma"`},
		{name: "auth with net go", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.AuthConfig, s.AdminTokenSecret = secret, &veltrixv1.SecretKeyRef{Name: "admin", Key: "token"}
		}},
		{name: "admin token secret name", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.AdminTokenSecret = &veltrixv1.SecretKeyRef{Name: "Admin_Token", Key: "token"}
		}, want: "name must be a Secret name"},
		{name: "negative xfs percent", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: -5}
		},
			want: "rawVLog.xfsPartitionPercent must be between 1 and 99"},
		{name: "xfs percent 100", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 100}
		},
			want: "rawVLog.xfsPartitionPercent must be between 1 and 99"},
		{name: "xfs percent 99", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 99}
		}},
		{name: "server and metrics port", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.ServerPort, s.MetricsPort = 9000, 9000 },
			want: "serverPort, metricsPort and gossipPort must all differ"},
		{name: "metrics and gossip port", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.MetricsPort, s.GossipPort = 7000, 7000 },
			want: "serverPort, metricsPort and gossipPort must all differ"},
		{name: "port out of range", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.ServerPort = 70000 },
			want: "spec.serverPort: Invalid value: 70000"},
		{name: "image with a tag", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Image = "ghcr.io/veltrixdb/veltrixdb:1.0.0" },
			want: "image is a repository without a tag or digest"},
		{name: "image with a digest", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Image = "ghcr.io/veltrixdb/veltrixdb@sha256:0000" },
			want: "image is a repository without a tag or digest"},
		{name: "image on a registry port", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Image = "registry.local:5000/veltrixdb" }},
		{name: "zero disk size", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.DiskSize = ptr.To(q("0")) },
			want: "diskSize must be a positive quantity"},
		{name: "disk selector range inverted", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.DiskSelector = veltrixv1.DiskSelector{MinSize: ptr.To(q("2Ti")), MaxSize: ptr.To(q("1Ti"))}
		}, want: "diskSelector.minSize must not exceed diskSelector.maxSize"},
		{name: "disk selector range", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.DiskSelector = veltrixv1.DiskSelector{Model: "Samsung SSD 980", MinSize: ptr.To(q("1Ti")), MaxSize: ptr.To(q("1Ti")), NVMeOnly: ptr.To(false)}
		}},
		{name: "reclaim policy", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.ReclaimPolicy = "Recycle" },
			want: `spec.reclaimPolicy: Unsupported value: "Recycle"`},
		{name: "request above limit", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: q("1Gi")},
			}
		}, want: "resources.requests must not exceed resources.limits"},
		{name: "version before online membership", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Version = "1.16.2" },
			want: "version must be 1.17.0 or later: the operator adds and removes members online (--join, --advertise-addr, /admin/cluster/members), which VeltrixDB has only since 1.17.0; set version to 1.17.0 or later"},
		{name: "version at the minimum", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Version = veltrixv1.MinVersion }},
		{name: "io_uring bridge with sqpoll, Unconfined", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.URingBridge = veltrixv1.URingBridgeSQPoll
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}},
		{name: "io_uring bridge under a Localhost profile", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.URingBridge = veltrixv1.URingBridgeEnabled
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("operator/io-uring.json")}
		}},
		{name: "io_uring bridge without a seccomp profile", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.URingBridge = veltrixv1.URingBridgeEnabled },
			want: "uringBridge and net uring use io_uring, which the default seccomp profile (RuntimeDefault) blocks: set seccompProfile.type to Unconfined, or to Localhost with a profile that allows io_uring_setup, io_uring_enter and io_uring_register"},
		{name: "net uring without a seccomp profile", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Mode, s.Size, s.ReplicationFactor, s.Net = veltrixv1.ModeStandalone, 1, 1, veltrixv1.NetURing
		}, want: "uringBridge and net uring use io_uring"},
		{name: "io_uring bridge under RuntimeDefault", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.URingBridge = veltrixv1.URingBridgeEnabled
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, want: "seccompProfile RuntimeDefault blocks io_uring, which rawVLog, uringBridge and net uring use: set seccompProfile.type to Unconfined or Localhost"},
		{name: "raw vlog under RuntimeDefault", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.RawVLog.Enabled = true
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, want: "seccompProfile RuntimeDefault blocks io_uring"},
		{name: "RuntimeDefault asked for", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}},
		{name: "Localhost without its profile", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
		}, want: "seccompProfile.localhostProfile goes with type Localhost, and only with it"},
		{name: "a profile file without Localhost", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined, LocalhostProfile: ptr.To("x.json")}
		}, want: "seccompProfile.localhostProfile goes with type Localhost, and only with it"},
		{name: "an unknown seccomp type", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.SeccompProfile = &veltrixv1.SeccompProfile{Type: "Permissive"}
		}, want: `spec.seccompProfile.type: Unsupported value: "Permissive"`},
		// The server's own words are refused: YAML reads an unquoted on or off as a boolean.
		{name: "io_uring bridge as the server spells it", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.URingBridge = "on" },
			want: `spec.uringBridge: Unsupported value: "on": supported values: "Disabled", "Enabled", "SQPoll"`},
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

// TestUpdateRules: changes that would lose data are refused on update; scaling, upgrading
// and growing the volumes are not.
func TestUpdateRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	cases := []struct {
		name string
		spec func(*veltrixv1.VeltrixClusterSpec)
		want string
	}{
		{name: "scale and upgrade", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Size, s.Version = 5, "1.18.0" }},
		{name: "grow the disks", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.DiskSize = ptr.To(resource.MustParse("20Gi")) }},
		{name: "shrink the disks", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.DiskSize = ptr.To(resource.MustParse("5Gi")) },
			want: "diskSize can only grow"},
		{name: "drop the disk size", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.DiskSize = nil },
			want: "diskSize can only grow"},
		{name: "storage class", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.StorageClassName = "standard" },
			want: "storageClassName is immutable"},
		{name: "disks per node", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.DisksPerNode = 2 },
			want: "disksPerNode is immutable"},
		{name: "mode", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Mode = veltrixv1.ModeRaft },
			want: "mode is fixed at creation"},
		{name: "raw vlog off", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.RawVLog.Enabled = false },
			want: "rawVLog is immutable"},
		{name: "raw vlog split", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.RawVLog.XFSPartitionPercent = 30 },
			want: "rawVLog is immutable"},
		{name: "reclaim policy", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.ReclaimPolicy = veltrixv1.ReclaimDelete }},
		{name: "downgrade below the minimum", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.Version = "1.16.0" },
			want: "version must be 1.17.0 or later"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			c.Spec.DiskSize = ptr.To(resource.MustParse("10Gi"))
			c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 20}
			if err := env.Client.Create(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			tc.spec(&c.Spec)
			if v := verdict(env.Client.Update(context.Background(), c), tc.want); v != "" {
				t.Error(v)
			}
		})
	}
}

// TestVersionMinimum: the CRD's version rule and VersionBelowMin, which the operator
// applies to clusters stored before the rule, agree on every tag: a tag that reads as a
// version below 1.17.0 is refused, any other (later versions, latest, branch names) is
// accepted.
func TestVersionMinimum(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	for _, tag := range []string{
		"1.17.0", "1.17", "v1.17.0", "1.17.0-rc.1", "1.18.0", "1.100.0", "2.0.0", "10.0", "01.017.0", "99999999999999999999.0",
		"1.16.2", "1.16", "v1.16.0", "1.16.0-hotfix", "1.9.0", "1.0.0", "1.1", "0.99.0", "0.99999999999999999999.1", "1.06.0",
		"latest", "main", "nightly-2026-12-01", "1", "sha-1a2b3c",
	} {
		c := minimal(ns)
		c.Spec.Version = tag
		err := env.Client.Create(context.Background(), c)
		want := ""
		if veltrixv1.VersionBelowMin(tag) {
			want = "version must be 1.17.0 or later"
		}
		if v := verdict(err, want); v != "" {
			t.Errorf("version %q (VersionBelowMin %v): %s", tag, want != "", v)
		}
	}
}

// TestSamplesApply: the document's sample and deploy/samples/veltrix.yaml are accepted with
// strict field validation and stored as written, plus the schema's defaults; the document's
// version 1.0.0 predates online membership, so its sample is accepted with version 1.17.0.
func TestSamplesApply(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	for _, path := range []string{"testdata/document-sample.yaml", "../../../../deploy/samples/veltrix.yaml"} {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sent := &veltrixv1.VeltrixCluster{}
			if err := yaml.UnmarshalStrict(data, sent); err != nil {
				t.Fatalf("%s does not fit the Go types: %v", path, err)
			}
			sent.Namespace = ns
			if veltrixv1.VersionBelowMin(sent.Spec.Version) {
				// The document's sample names 1.0.0, older than online membership: refused as
				// written, saying what to change, and accepted once changed.
				if v := verdict(env.Client.Create(context.Background(), sent.DeepCopy()), "set version to 1.17.0 or later"); v != "" {
					t.Errorf("version %s: %s", sent.Spec.Version, v)
				}
				sent.Spec.Version = veltrixv1.MinVersion
			}
			// What the API server must store: the sample, plus the defaults of what it leaves out.
			want := sent.Spec.DeepCopy()
			if want.Mode == "" {
				want.Mode = veltrixv1.DefaultMode
			}
			if want.Net == "" {
				want.Net = veltrixv1.DefaultNet
			}
			if want.ReclaimPolicy == "" {
				want.ReclaimPolicy = veltrixv1.DefaultReclaimPolicy
			}
			if want.URingBridge == "" {
				want.URingBridge = veltrixv1.DefaultURingBridge
			}
			if want.LostNodes.Replace == "" {
				want.LostNodes.Replace = veltrixv1.DefaultLostNodeReplace
			}
			if want.DiskSelector.NVMeOnly == nil {
				want.DiskSelector.NVMeOnly = ptr.To(veltrixv1.DefaultNVMeOnly)
			}
			if want.TerminationGracePeriodSeconds == nil {
				want.TerminationGracePeriodSeconds = ptr.To(veltrixv1.DefaultTerminationGracePeriodSeconds)
			}
			if err := env.Client.Create(context.Background(), sent.DeepCopy(), client.FieldValidation("Strict")); err != nil {
				t.Fatalf("creating %s: %v", sent.Name, err)
			}
			stored := &veltrixv1.VeltrixCluster{}
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(sent), stored); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(stored.Spec, *want) {
				t.Errorf("stored spec\n got %+v\nwant %+v", stored.Spec, *want)
			}
		})
	}
}

// TestStatusAndColumns: the status subresource stores what the reconciler reports (members
// keyed by id, conditions by type), and `kubectl get vc` shows SIZE, READY, VERSION, STATE,
// REASON, LAST FAILOVER and AGE (EPOCH and LAST SCALE with -o wide) from the fields the
// reconciler fills.
func TestStatusAndColumns(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	ctx := context.Background()
	c := minimal(ns)
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	c.Status = veltrixv1.VeltrixClusterStatus{
		ObservedGeneration: c.Generation, State: veltrixv1.StateReconciling, Reason: "MembersNotReady", Size: 3, ReadyMembers: 2,
		Version: veltrixv1.DefaultVersion, Epoch: 4, PartitionCount: 64, PartitionMap: "demo-0:22 demo-1:21 demo-2:21",
		LastScaleTime: &now, LastFailoverTime: &now, Nodes: []string{"n1", "n2", "n3"},
		Members:    []veltrixv1.MemberStatus{{ID: "demo-0", Address: "demo-0.demo:9000", State: "active", SearchReady: true}, {ID: "demo-1", State: "leaving"}},
		Conditions: []metav1.Condition{{Type: veltrixv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "MembersNotReady", Message: "2 of 3", LastTransitionTime: now}},
	}
	if err := env.Client.Status().Update(ctx, c); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got := &veltrixv1.VeltrixCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyMembers != 2 || got.Status.Epoch != 4 || len(got.Status.Members) != 2 || !got.Status.Members[0].SearchReady || got.Status.LastFailoverTime == nil {
		t.Errorf("stored status %+v", got.Status)
	}
	got.Status.Members = append(got.Status.Members, veltrixv1.MemberStatus{ID: "demo-0"})
	if v := verdict(env.Client.Status().Update(ctx, got), `status.members[2]: Duplicate value`); v != "" {
		t.Error(v)
	}
	got.Status.Members = got.Status.Members[:2]
	got.Status.State = "Happy"
	if v := verdict(env.Client.Status().Update(ctx, got), `status.state: Unsupported value: "Happy"`); v != "" {
		t.Error(v)
	}
	// The suite's words only: Running, the Ready state's former name, is refused.
	got.Status.State = "Running"
	if v := verdict(env.Client.Status().Update(ctx, got), `status.state: Unsupported value: "Running"`); v != "" {
		t.Error(v)
	}

	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "veltrixclusters.veltrix.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if names, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames"); !reflect.DeepEqual(names, []string{"vc"}) {
		t.Errorf("short names %v, want [vc]", names)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("versions %v", versions)
	}
	cols, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "additionalPrinterColumns")
	var shown []string
	for _, col := range cols {
		m := col.(map[string]any)
		shown = append(shown, fmt.Sprintf("%s=%s", strings.ToUpper(m["name"].(string)), m["jsonPath"]))
	}
	want := []string{"SIZE=.spec.size", "READY=.status.readyMembers", "VERSION=.spec.version", "STATE=.status.state", "REASON=.status.reason", "EPOCH=.status.epoch", "LAST SCALE=.status.lastScaleTime", "LAST FAILOVER=.status.lastFailoverTime", "AGE=.metadata.creationTimestamp"}
	if !reflect.DeepEqual(shown, want) {
		t.Errorf("printer columns %v, want %v", shown, want)
	}
}

// TestZeroValuesWrittenInYAML: zeros a Go client omits (omitempty) but a manifest can
// carry are refused too, not silently replaced by the defaults.
func TestZeroValuesWrittenInYAML(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	for field, want := range map[string]string{
		"rawVLog: {enabled: true, xfsPartitionPercent: 0}": "rawVLog.xfsPartitionPercent must be between 1 and 99",
		"size: 0":         "spec.size: Invalid value: 0",
		"disksPerNode: 0": "spec.disksPerNode: Invalid value: 0",
	} {
		obj := &unstructured.Unstructured{}
		manifest := "apiVersion: veltrix.io/v1alpha1\nkind: VeltrixCluster\nmetadata: {generateName: vc-, namespace: " + ns + "}\nspec:\n  " + field + "\n"
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if v := verdict(env.Client.Create(context.Background(), obj), want); v != "" {
			t.Errorf("%s: %s", field, v)
		}
	}
}

package resources

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files from the builders' output")

// minimal is a cluster as a user writes it before admission: every default comes from the
// Go constants.
func minimal() *memgraphv1.MemgraphCluster {
	return &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "db"},
		Spec:       memgraphv1.MemgraphClusterSpec{Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"}},
	}
}

// tuned sets every knob the builders read.
func tuned() *memgraphv1.MemgraphCluster {
	c := minimal()
	gi := resource.MustParse("5Gi")
	fast := "fast"
	c.Spec = memgraphv1.MemgraphClusterSpec{
		Coordinators: 5, DataInstances: 3,
		Image:            memgraphv1.ImageSpec{Repository: "registry:5000/memgraph", Tag: "3.12.1", PullPolicy: corev1.PullAlways},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Secrets:          memgraphv1.SecretsSpec{Name: "lic", LicenseKey: "key", OrganizationKey: "org"},
		Auth:             &memgraphv1.AuthSpec{SecretName: "admin", UserKey: "user", PasswordKey: "pass"},
		TLS:              &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: "bolt-tls"}},
		Storage: memgraphv1.StorageSpec{
			RetentionPolicy: memgraphv1.RetentionDelete,
			Data:            memgraphv1.RoleStorage{LibPVCSize: &gi, LibStorageClassName: &fast, LogStorageAccessMode: "ReadWriteOncePod"},
		},
		ClusterDomain: "example.org",
		Ports:         memgraphv1.PortsSpec{Bolt: 17687, Management: 11000, Coordinator: 13000, Replication: 21000, Metrics: 19091},
		Probes: memgraphv1.RoleProbes{Data: memgraphv1.Probes{
			Readiness: &memgraphv1.ProbeTimings{InitialDelaySeconds: 3, PeriodSeconds: 7},
		}},
		Resources: memgraphv1.RoleResources{Data: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}},
		Labels:    memgraphv1.RoleLabels{Data: map[string]memgraphv1.LabelValue{"team": "graph"}},
		ExtraEnv:  memgraphv1.RoleEnv{Coordinators: []memgraphv1.EnvVar{{Name: "TZ", Value: "UTC"}}},
		ExtraArgs: memgraphv1.RoleArgs{Data: []memgraphv1.Arg{"--log-level=DEBUG"}, Coordinators: []memgraphv1.Arg{"--instance-down-timeout-sec=3"}},
		Affinity: memgraphv1.RoleAffinity{Data: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "role", Operator: corev1.NodeSelectorOpIn, Values: []string{"data-node"}}},
			}}},
		}}},
		NodeSelector: memgraphv1.RoleNodeSelector{Coordinators: map[string]memgraphv1.LabelValue{"role": "coordinator-node"}},
		Tolerations: memgraphv1.RoleTolerations{Data: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "memgraph", Effect: corev1.TaintEffectNoSchedule},
		}},
		TopologySpreadConstraints: memgraphv1.RoleTopologySpreadConstraints{Data: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway},
		}},
		PriorityClassName:             memgraphv1.RolePriorityClassName{Coordinators: "system-cluster-critical", Data: "memgraph-data"},
		TerminationGracePeriodSeconds: memgraphv1.RoleTerminationGracePeriod{Data: ptr.To[int64](3600)},
	}
	return c
}

// TestGolden pins every object the builders render for a minimal and a fully tuned
// cluster; `go test ./internal/resources -update` rewrites them for review.
func TestGolden(t *testing.T) {
	for name, c := range map[string]*memgraphv1.MemgraphCluster{"minimal": minimal(), "tuned": tuned()} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{
				StatefulSet(c, RoleCoordinator, Coordinators(c)),
				StatefulSet(c, RoleData, DataInstances(c)),
				HeadlessService(c, RoleCoordinator),
				HeadlessService(c, RoleData),
				ClientService(c),
				PodDisruptionBudget(c, RoleCoordinator),
				PodDisruptionBudget(c, RoleData),
			}
			var docs []string
			for _, o := range objs {
				b, err := yaml.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(b))
			}
			testenv.Golden(t, filepath.Join("testdata", name+".golden.yaml"), []byte(strings.Join(docs, "---\n")), *update)
		})
	}
}

func TestCoordinatorIdentityFromOrdinal(t *testing.T) {
	c := minimal()
	sts := StatefulSet(c, RoleCoordinator, 3)
	if sts.Spec.Ordinals == nil || sts.Spec.Ordinals.Start != 1 {
		t.Fatalf("coordinator ordinals start at %v, want 1 so that pod <name>-coordinator-<id> is coordinator_<id>", sts.Spec.Ordinals)
	}
	ctr := sts.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--coordinator-id=$(MEMGRAPH_COORDINATOR_ID)") ||
		!slices.Contains(ctr.Args, "--coordinator-hostname=$(MEMGRAPH_COORDINATOR_HOSTNAME)") ||
		!slices.Contains(ctr.Args, "--coordinator-port=12000") {
		t.Errorf("coordinator args lack the identity flags: %v", ctr.Args)
	}
	env := envMap(ctr.Env)
	if got := env[EnvCoordinatorID]; got.ValueFrom == nil || got.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("%s = %+v, want the pod-index label", EnvCoordinatorID, got)
	}
	// The pod's hostname expands to the FQDN the operator registers.
	host := strings.NewReplacer("$(POD_NAME)", "demo-coordinator-2", "$(POD_NAMESPACE)", "db").Replace(env[EnvCoordinatorHostname].Value)
	if want := "demo-coordinator-2.demo-coordinators.db.svc.cluster.local"; host != want || host != PodFQDN(c, RoleCoordinator, 2) {
		t.Errorf("coordinator hostname expands to %q, want %q (= PodFQDN)", host, want)
	}
	// Data instances have no identity flags and no coordinator port.
	data := StatefulSet(c, RoleData, 2)
	if data.Spec.Ordinals != nil {
		t.Errorf("data ordinals %v, want the default 0", data.Spec.Ordinals)
	}
	for _, a := range data.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--coordinator") {
			t.Errorf("data instance has %s", a)
		}
	}
}

// TestRunsWithoutAShell: the image's own binary, so both a real kubelet and the local
// cluster's runner (which replaces /usr/lib/memgraph/memgraph by the simulator) start it.
func TestRunsWithoutAShell(t *testing.T) {
	for _, r := range []Role{RoleCoordinator, RoleData} {
		ctr := StatefulSet(minimal(), r, 1).Spec.Template.Spec.Containers[0]
		if !slices.Equal(ctr.Command, []string{"/usr/lib/memgraph/memgraph"}) {
			t.Errorf("%s command %v", r, ctr.Command)
		}
		for _, a := range ctr.Args {
			if !strings.HasPrefix(a, "--") {
				t.Errorf("%s arg %q is not a flag", r, a)
			}
		}
	}
}

func TestRestrictedSecurityContext(t *testing.T) {
	for _, r := range []Role{RoleCoordinator, RoleData} {
		spec := StatefulSet(minimal(), r, 1).Spec.Template.Spec
		psc, csc := spec.SecurityContext, spec.Containers[0].SecurityContext
		if *psc.RunAsUser != 101 || *psc.RunAsGroup != 103 || *psc.FSGroup != 103 || !*psc.RunAsNonRoot ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s pod security context %+v", r, psc)
		}
		if *csc.AllowPrivilegeEscalation || !*csc.ReadOnlyRootFilesystem || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s container security context %+v", r, csc)
		}
		if len(spec.InitContainers) != 0 {
			t.Errorf("%s has init containers %v: vm.max_map_count is checked through the node agent", r, spec.InitContainers)
		}
	}
}

func TestLicenseAndExtras(t *testing.T) {
	c := tuned()
	data := StatefulSet(c, RoleData, 3).Spec.Template.Spec.Containers[0]
	env := envMap(data.Env)
	for name, key := range map[string]string{EnvLicense: "key", EnvOrganization: "org"} {
		ref := env[name].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "lic" || ref.SecretKeyRef.Key != key {
			t.Errorf("%s = %+v, want secret lic key %s", name, env[name], key)
		}
	}
	if last := data.Args[len(data.Args)-1]; last != "--log-level=DEBUG" {
		t.Errorf("extraArgs not last: %v", data.Args)
	}
	coord := StatefulSet(c, RoleCoordinator, 5).Spec.Template.Spec.Containers[0]
	if last := coord.Env[len(coord.Env)-1]; last.Name != "TZ" || last.Value != "UTC" {
		t.Errorf("extraEnv not last: %v", coord.Env)
	}
	if last := coord.Args[len(coord.Args)-1]; last != "--instance-down-timeout-sec=3" {
		t.Errorf("coordinator extraArgs not last: %v", coord.Args)
	}
	// Defaults of an unset license spec.
	env = envMap(StatefulSet(minimal(), RoleData, 1).Spec.Template.Spec.Containers[0].Env)
	if env[EnvLicense].ValueFrom.SecretKeyRef.Key != "MEMGRAPH_ENTERPRISE_LICENSE" || env[EnvOrganization].ValueFrom.SecretKeyRef.Key != "MEMGRAPH_ORGANIZATION_NAME" {
		t.Errorf("default license keys: %+v", env)
	}
}

// TestAuthEnv: spec.auth reaches the data instances as Secret references (a reference, so
// a new password changes no template and rolls nothing); without it neither variable is
// set. Coordinators never get them: they store no users and run without auth
// (memgraph/helm-charts#227).
func TestAuthEnv(t *testing.T) {
	cases := []struct {
		name           string
		auth           *memgraphv1.AuthSpec
		user, password string // want keys; "" = variable absent
	}{
		{"none", nil, "", ""},
		{"defaults", &memgraphv1.AuthSpec{SecretName: "admin"}, memgraphv1.DefaultAuthUserKey, memgraphv1.DefaultAuthPasswordKey},
		{"keys", &memgraphv1.AuthSpec{SecretName: "admin", UserKey: "u", PasswordKey: "p"}, "u", "p"},
	}
	for _, tc := range cases {
		c := minimal()
		c.Spec.Auth = tc.auth
		for _, r := range []Role{RoleCoordinator, RoleData} {
			env := envMap(StatefulSet(c, r, 3).Spec.Template.Spec.Containers[0].Env)
			for name, key := range map[string]string{EnvUser: tc.user, EnvPassword: tc.password} {
				if r == RoleCoordinator {
					key = ""
				}
				e, ok := env[name]
				switch {
				case key == "" && ok:
					t.Errorf("%s/%s: %s set without spec.auth: %+v", tc.name, r, name, e)
				case key != "" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "admin" || e.ValueFrom.SecretKeyRef.Key != key || e.Value != ""):
					t.Errorf("%s/%s: %s = %+v, want secret admin key %s", tc.name, r, name, e, key)
				}
			}
		}
	}
}

func TestStorageAndRetention(t *testing.T) {
	cases := []struct {
		name             string
		c                *memgraphv1.MemgraphCluster
		r                Role
		deleted, scaled  appsv1.PersistentVolumeClaimRetentionPolicyType
		libSize, logSize string
		libClass         *string
		logMode          corev1.PersistentVolumeAccessMode
	}{
		{"defaults", minimal(), RoleData, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, "1Gi", "256Mi", nil, corev1.ReadWriteOnce},
		{"tuned data", tuned(), RoleData, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, "5Gi", "256Mi", ptr.To("fast"), corev1.ReadWriteOncePod},
		{"tuned coordinators", tuned(), RoleCoordinator, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, "1Gi", "256Mi", nil, corev1.ReadWriteOnce},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sts := StatefulSet(tc.c, tc.r, 1)
			rp := sts.Spec.PersistentVolumeClaimRetentionPolicy
			if rp.WhenDeleted != tc.deleted || rp.WhenScaled != tc.scaled {
				t.Errorf("retention %+v", rp)
			}
			if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
				t.Errorf("update strategy %v, want OnDelete (the operator rolls)", sts.Spec.UpdateStrategy.Type)
			}
			vct := sts.Spec.VolumeClaimTemplates
			if len(vct) != 2 || vct[0].Name != VolumeLib || vct[1].Name != VolumeLog {
				t.Fatalf("claim templates %v", vct)
			}
			if q := vct[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != tc.libSize {
				t.Errorf("lib size %s, want %s", q.String(), tc.libSize)
			}
			if q := vct[1].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != tc.logSize {
				t.Errorf("log size %s, want %s", q.String(), tc.logSize)
			}
			if !equalPtr(vct[0].Spec.StorageClassName, tc.libClass) {
				t.Errorf("lib class %v, want %v", vct[0].Spec.StorageClassName, tc.libClass)
			}
			if vct[1].Spec.AccessModes[0] != tc.logMode {
				t.Errorf("log access mode %v, want %v", vct[1].Spec.AccessModes, tc.logMode)
			}
		})
	}
}

// TestPodAnnotations: spec.annotations of a role go on that role's pod template only
// (not the other role's, not the StatefulSet, not the Services); keys under memgraph.com/
// are the operator's even on a spec that never passed admission; none set, none rendered.
func TestPodAnnotations(t *testing.T) {
	c := tuned()
	if a := StatefulSet(c, RoleData, 3).Spec.Template.Annotations; a != nil {
		t.Errorf("annotations %v without spec.annotations", a)
	}
	c.Spec.Annotations = memgraphv1.RoleAnnotations{
		Data:         map[string]string{"example.com/backup": "daily", "memgraph.com/role-assigned": "forged"},
		Coordinators: map[string]string{"sidecar.istio.io/inject": "false"},
	}
	data, coord := StatefulSet(c, RoleData, 3), StatefulSet(c, RoleCoordinator, 3)
	if got := data.Spec.Template.Annotations; len(got) != 1 || got["example.com/backup"] != "daily" {
		t.Errorf("data pod annotations %v, want example.com/backup=daily alone", got)
	}
	if got := coord.Spec.Template.Annotations; len(got) != 1 || got["sidecar.istio.io/inject"] != "false" {
		t.Errorf("coordinator pod annotations %v, want sidecar.istio.io/inject=false alone", got)
	}
	if data.Annotations != nil || HeadlessService(c, RoleData).Annotations != nil || ClientService(c).Annotations != nil {
		t.Errorf("pod annotations leaked onto the StatefulSet or Services: %v %v %v",
			data.Annotations, HeadlessService(c, RoleData).Annotations, ClientService(c).Annotations)
	}
}

func TestLabelsAndSelectors(t *testing.T) {
	c := tuned()
	sts := StatefulSet(c, RoleData, 3)
	if sts.Labels["team"] != "graph" || sts.Spec.Template.Labels["team"] != "graph" {
		t.Errorf("user labels missing: %v / %v", sts.Labels, sts.Spec.Template.Labels)
	}
	if _, ok := sts.Spec.Selector.MatchLabels["team"]; ok {
		t.Error("a user label is in the immutable selector")
	}
	// A spec that never passed admission cannot take over the selector labels, nor the
	// StatefulSet controller's.
	c.Spec.Labels.Data["app.kubernetes.io/component"] = "hijack"
	c.Spec.Labels.Data[LabelCluster] = "other"
	c.Spec.Labels.Data[LabelPodIndex] = "7"
	hijacked := StatefulSet(c, RoleData, 3).Spec.Template.Labels
	if hijacked[LabelComponent] != "data" || hijacked[LabelCluster] != c.Name {
		t.Errorf("selector labels taken over: %v", hijacked)
	}
	if got, ok := hijacked[LabelPodIndex]; ok {
		t.Errorf("pod template carries %s=%q, which only the StatefulSet controller sets", LabelPodIndex, got)
	}
	for _, svc := range []*corev1.Service{HeadlessService(c, RoleCoordinator), HeadlessService(c, RoleData)} {
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
			t.Errorf("%s is not headless with not-ready addresses", svc.Name)
		}
	}
	if got := HeadlessService(c, RoleCoordinator).Name; got != "demo-coordinators" {
		t.Errorf("coordinators service %q", got)
	}
	if got := HeadlessService(c, RoleData).Name; got != "demo-data" {
		t.Errorf("data service %q", got)
	}
	for _, r := range []Role{RoleCoordinator, RoleData} {
		pdb := PodDisruptionBudget(c, r)
		if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels[LabelComponent] != string(r) {
			t.Errorf("%s PDB %+v", r, pdb.Spec)
		}
	}
}

func TestDesiredMembership(t *testing.T) {
	c := minimal() // 3 coordinators, 2 data instances declared
	cases := []struct {
		name                string
		liveCoord, liveData int32
		coordIDs            []int
		dataNames           []string
		retiringC           []int
		retiringD           []string
	}{
		{"as declared", 3, 2, []int{1, 2, 3}, []string{"demo_data_0", "demo_data_1"}, nil, nil},
		{"shrinking both", 5, 4, []int{1, 2, 3, 4, 5}, []string{"demo_data_0", "demo_data_1", "demo_data_2", "demo_data_3"}, []int{4, 5}, []string{"demo_data_2", "demo_data_3"}},
		{"growing", 1, 1, []int{1}, []string{"demo_data_0"}, nil, nil},
		{"nothing yet", 0, 0, nil, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := DesiredMembership(c, tc.liveCoord, tc.liveData)
			var ids []int
			for _, co := range m.Coordinators {
				ids = append(ids, co.ID)
			}
			var names []string
			for _, d := range m.Data {
				names = append(names, d.Name)
			}
			if !slices.Equal(ids, tc.coordIDs) || !slices.Equal(names, tc.dataNames) ||
				!slices.Equal(m.RetiringCoordinators, tc.retiringC) || !slices.Equal(m.RetiringData, tc.retiringD) {
				t.Errorf("got ids %v data %v retiring %v %v", ids, names, m.RetiringCoordinators, m.RetiringData)
			}
		})
	}
	m := DesiredMembership(tuned(), 1, 1)
	want := planner.Coordinator{ID: 1, Name: "coordinator_1",
		BoltServer:        "demo-coordinator-1.demo-coordinators.db.svc.example.org:17687",
		CoordinatorServer: "demo-coordinator-1.demo-coordinators.db.svc.example.org:13000",
		ManagementServer:  "demo-coordinator-1.demo-coordinators.db.svc.example.org:11000"}
	if m.Coordinators[0] != want {
		t.Errorf("coordinator %+v, want %+v", m.Coordinators[0], want)
	}
	wantData := planner.DataInstance{Name: "demo_data_0",
		BoltServer:        "demo-data-0.demo-data.db.svc.example.org:17687",
		ManagementServer:  "demo-data-0.demo-data.db.svc.example.org:11000",
		ReplicationServer: "demo-data-0.demo-data.db.svc.example.org:21000", Mode: "SYNC"}
	if m.Data[0] != wantData {
		t.Errorf("data %+v, want %+v", m.Data[0], wantData)
	}
	wantSettings := []planner.Setting{{Name: "instance_down_timeout_sec", Value: "5"},
		{Name: "instance_health_check_frequency_sec", Value: "1"}, {Name: "sync_failover_only", Value: "true"}}
	if !slices.Equal(m.Settings, wantSettings) {
		t.Errorf("settings %v, want %v", m.Settings, wantSettings)
	}
	// Modes and settings come from the spec: the cluster's mode, an instance's own, the
	// settings as Memgraph spells them.
	c2 := tuned()
	c2.Spec.Replication = memgraphv1.ReplicationSpec{Mode: memgraphv1.ReplicationStrictSync,
		Instances: []memgraphv1.InstanceReplication{{Ordinal: 1, Mode: memgraphv1.ReplicationAsync}}}
	c2.Spec.CoordinatorSettings = memgraphv1.CoordinatorSettings{InstanceDownTimeoutSec: 9, InstanceHealthCheckFrequencySec: 2, SyncFailoverOnly: ptr.To(false)}
	m2 := DesiredMembership(c2, 1, 3)
	if got := []string{m2.Data[0].Mode, m2.Data[1].Mode, m2.Data[2].Mode}; !slices.Equal(got, []string{"STRICT_SYNC", "ASYNC", "STRICT_SYNC"}) {
		t.Errorf("modes %v", got)
	}
	if want := []planner.Setting{{Name: "instance_down_timeout_sec", Value: "9"},
		{Name: "instance_health_check_frequency_sec", Value: "2"}, {Name: "sync_failover_only", Value: "false"}}; !slices.Equal(m2.Settings, want) {
		t.Errorf("settings %v, want %v", m2.Settings, want)
	}
	if got := DataInstanceName("my.graph-x", 3); got != "my_graph_x_data_3" {
		t.Errorf("DataInstanceName = %q", got)
	}
}

func envMap(env []corev1.EnvVar) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range env {
		m[e.Name] = e
	}
	return m
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// TestPlacementDefaults: with nothing set, each role prefers distinct hosts for its own
// members (preferred, so a small cluster still schedules) and data instances get the
// grace period a snapshot on exit needs; nothing else constrains scheduling.
func TestPlacementDefaults(t *testing.T) {
	c := minimal()
	for _, tc := range []struct {
		r     Role
		grace int64
	}{
		{RoleCoordinator, memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds},
		{RoleData, memgraphv1.DefaultDataTerminationGracePeriodSeconds},
	} {
		spec := StatefulSet(c, tc.r, 3).Spec.Template.Spec
		a := spec.Affinity
		if a == nil || a.PodAntiAffinity == nil || a.NodeAffinity != nil || a.PodAffinity != nil ||
			len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 ||
			len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("%s affinity %+v, want one preferred pod anti-affinity", tc.r, a)
		}
		term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0]
		if term.Weight != 100 || term.PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
			!equalMaps(term.PodAffinityTerm.LabelSelector.MatchLabels, Selector("demo", tc.r)) ||
			len(term.PodAffinityTerm.LabelSelector.MatchLabels) == 0 {
			t.Errorf("%s anti-affinity %+v, want weight 100 on kubernetes.io/hostname over the role's own pods", tc.r, term)
		}
		// The selector matches this role's pods and not the other role's.
		other := RoleData
		if tc.r == RoleData {
			other = RoleCoordinator
		}
		if !matches(term.PodAffinityTerm.LabelSelector.MatchLabels, RoleLabels(c, tc.r)) || matches(term.PodAffinityTerm.LabelSelector.MatchLabels, RoleLabels(c, other)) {
			t.Errorf("%s anti-affinity selector %v matches the wrong pods", tc.r, term.PodAffinityTerm.LabelSelector.MatchLabels)
		}
		if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != tc.grace {
			t.Errorf("%s grace period %v, want %d", tc.r, spec.TerminationGracePeriodSeconds, tc.grace)
		}
		if spec.NodeSelector != nil || spec.Tolerations != nil || spec.TopologySpreadConstraints != nil || spec.PriorityClassName != "" {
			t.Errorf("%s scheduling constrained by default: %v %v %v %q", tc.r, spec.NodeSelector, spec.Tolerations, spec.TopologySpreadConstraints, spec.PriorityClassName)
		}
	}
	if memgraphv1.DefaultDataTerminationGracePeriodSeconds < 600 {
		t.Errorf("data grace period %d s leaves no time for a snapshot of a large graph", memgraphv1.DefaultDataTerminationGracePeriodSeconds)
	}
}

// TestPlacementFromSpec: each role's fields reach only that role's pods; a role's own
// nodeAffinity keeps the default host spread, its own podAntiAffinity replaces it; a
// spread constraint without a selector spreads the role's pods.
func TestPlacementFromSpec(t *testing.T) {
	c := tuned()
	data := StatefulSet(c, RoleData, 3).Spec.Template.Spec
	coord := StatefulSet(c, RoleCoordinator, 5).Spec.Template.Spec

	if data.Affinity.NodeAffinity == nil || data.Affinity.PodAntiAffinity == nil ||
		data.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != HostnameTopologyKey {
		t.Errorf("data affinity %+v, want the node affinity and the default host spread", data.Affinity)
	}
	if coord.Affinity.NodeAffinity != nil {
		t.Errorf("the data instances' node affinity reached the coordinators: %+v", coord.Affinity)
	}
	if len(data.Tolerations) != 1 || data.Tolerations[0].Key != "dedicated" || coord.Tolerations != nil {
		t.Errorf("tolerations data %v coordinators %v", data.Tolerations, coord.Tolerations)
	}
	if coord.NodeSelector["role"] != "coordinator-node" || data.NodeSelector != nil {
		t.Errorf("node selectors coordinators %v data %v", coord.NodeSelector, data.NodeSelector)
	}
	if len(data.TopologySpreadConstraints) != 1 || data.TopologySpreadConstraints[0].LabelSelector == nil ||
		!equalMaps(data.TopologySpreadConstraints[0].LabelSelector.MatchLabels, Selector(c.Name, RoleData)) || coord.TopologySpreadConstraints != nil {
		t.Errorf("spread data %+v coordinators %+v, want the data selector filled in", data.TopologySpreadConstraints, coord.TopologySpreadConstraints)
	}
	if c.Spec.TopologySpreadConstraints.Data[0].LabelSelector != nil {
		t.Error("the builder wrote the selector into the spec")
	}
	if coord.PriorityClassName != "system-cluster-critical" || data.PriorityClassName != "memgraph-data" {
		t.Errorf("priority classes %q %q", coord.PriorityClassName, data.PriorityClassName)
	}
	if *data.TerminationGracePeriodSeconds != 3600 || *coord.TerminationGracePeriodSeconds != memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds {
		t.Errorf("grace periods data %d coordinators %d", *data.TerminationGracePeriodSeconds, *coord.TerminationGracePeriodSeconds)
	}

	// A role's own pod anti-affinity (the HA chart's "unique": required distinct hosts)
	// replaces the default instead of adding to it; a selector of its own is kept.
	required := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelCluster: c.Name}}, TopologyKey: HostnameTopologyKey,
	}}}}
	c.Spec.Affinity.Coordinators = required
	c.Spec.TopologySpreadConstraints.Coordinators = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
	}}
	coord = StatefulSet(c, RoleCoordinator, 5).Spec.Template.Spec
	if a := coord.Affinity.PodAntiAffinity; len(a.PreferredDuringSchedulingIgnoredDuringExecution) != 0 || len(a.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("coordinators' own anti-affinity %+v, want it alone", a)
	}
	if coord.TopologySpreadConstraints[0].LabelSelector.MatchLabels["x"] != "y" {
		t.Errorf("own spread selector replaced: %+v", coord.TopologySpreadConstraints[0].LabelSelector)
	}
	coord.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "changed"
	if required.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != HostnameTopologyKey {
		t.Error("the builder shares the spec's affinity with the pod template")
	}
}

// TestRetentionFollowsOneField: storage.retentionPolicy decides both cases unless
// retentionPolicyWhenScaled overrides the scale-down one.
func TestRetentionFollowsOneField(t *testing.T) {
	del, ret := memgraphv1.RetentionDelete, memgraphv1.RetentionRetain
	cases := []struct {
		policy          memgraphv1.RetentionAction
		whenScaled      *memgraphv1.RetentionAction
		deleted, scaled appsv1.PersistentVolumeClaimRetentionPolicyType
	}{
		{"", nil, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		{del, nil, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		{ret, &del, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		{del, &ret, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
	}
	for _, tc := range cases {
		c := minimal()
		c.Spec.Storage.RetentionPolicy, c.Spec.Storage.RetentionPolicyWhenScaled = tc.policy, tc.whenScaled
		for _, r := range []Role{RoleCoordinator, RoleData} {
			rp := StatefulSet(c, r, 3).Spec.PersistentVolumeClaimRetentionPolicy
			if rp.WhenDeleted != tc.deleted || rp.WhenScaled != tc.scaled {
				t.Errorf("%q/%v %s: %+v, want deleted %s scaled %s", tc.policy, tc.whenScaled, r, rp, tc.deleted, tc.scaled)
			}
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// matches says whether every key of sel is in labels with its value.
func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

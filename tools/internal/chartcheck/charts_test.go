package chartcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var operators = []string{"vald-operator", "veltrix-operator", "valkey-operator", "memgraph-operator"}

var allCharts = append(slices.Clone(operators), "node-agent")

// library is the chart of the operators' common templates, vendored into each operator chart.
const library = "opsuite-lib"

// repoRoot is the directory holding go.work, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.work above %s", dir)
		}
	}
}

// helm runs the pinned helm with its own cache, config and data directories under
// .cache/helm (never $HOME, which would move Go's module cache too).
type helm struct {
	bin, root string
	env       []string
}

func newHelm(t *testing.T) helm {
	t.Helper()
	root := repoRoot(t)
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(root, ".cache", "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm binary missing (%v): build the pinned one with\n"+
			"  cd tools && GOWORK=off go build -o ../.cache/bin/ helm.sh/helm/v3/cmd/helm\n"+
			"or point $HELM at one", err)
	}
	h := helm{bin: bin, root: root, env: os.Environ()}
	for _, d := range []string{"CACHE", "CONFIG", "DATA"} {
		p := filepath.Join(root, ".cache", "helm", strings.ToLower(d))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		h.env = append(h.env, "HELM_"+d+"_HOME="+p)
	}
	return h
}

// kubeVersion is the cluster version charts render and lint for: that of the control plane
// the tests and the local cluster run (a helm built without Helm's Makefile ldflags would
// assume v1.20, which the charts' kubeVersion refuses).
var kubeVersion = strings.TrimPrefix(testenv.KubernetesVersion, "v")

// template renders a chart for kubeVersion.
func (h helm) template(args ...string) (string, error) {
	return h.run(append([]string{"template", "--kube-version", kubeVersion}, args...)...)
}

// lint runs `helm lint --strict` for kubeVersion.
func (h helm) lint(chart string) (string, error) {
	return h.run("lint", "--strict", "--kube-version", kubeVersion, chart)
}

func (h helm) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.root
	cmd.Env = h.env
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return out.String(), nil
}

// object is one rendered document.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	raw []byte
}

// decode splits helm template's output into objects.
func decode(t *testing.T, manifest string) []object {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("reading rendered YAML: %v", err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue // comments only
		}
		o.raw = doc
		objs = append(objs, o)
	}
}

// into decodes o strictly into a typed object: a misspelt field in a template fails here.
func into[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(o.raw, &v); err != nil {
		t.Fatalf("%s %s does not decode strictly: %v\n%s", o.Kind, o.Metadata.Name, err, o.raw)
	}
	return v
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && (name == "" || o.Metadata.Name == name) {
			return o, true
		}
	}
	return object{}, false
}

func mustFind(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	o, ok := find(objs, kind, name)
	if !ok {
		var have []string
		for _, o := range objs {
			have = append(have, o.Kind+"/"+o.Metadata.Name)
		}
		t.Fatalf("no %s %q rendered; have %v", kind, name, have)
	}
	return o
}

func appVersion(t *testing.T, root, chart string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		APIVersion  string `json:"apiVersion"`
		AppVersion  string `json:"appVersion"`
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.APIVersion != "v2" || c.KubeVersion != ">=1.30.0-0" || c.AppVersion == "" {
		t.Errorf("%s Chart.yaml: apiVersion %q kubeVersion %q appVersion %q", chart, c.APIVersion, c.KubeVersion, c.AppVersion)
	}
	return c.AppVersion
}

func TestChartsLint(t *testing.T) {
	h := newHelm(t)
	for _, c := range append(slices.Clone(allCharts), library) {
		t.Run(c, func(t *testing.T) {
			want := []string{"Chart.yaml", "values.yaml", "values.schema.json", "templates/NOTES.txt"}
			switch {
			case c == library:
				want = []string{"Chart.yaml", "templates/_helpers.tpl"}
			case slices.Contains(operators, c):
				want = append(want, "charts/"+library+"/Chart.yaml")
			default:
				want = append(want, "templates/_helpers.tpl")
			}
			for _, f := range want {
				if _, err := os.Stat(filepath.Join(h.root, "charts", c, f)); err != nil {
					t.Errorf("chart %s lacks %s", c, f)
				}
			}
			if _, err := h.lint("charts/" + c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The control-plane version has one source: shared/testenv, which the tests start, must be
// what tools/build-controlplane.sh builds (and the local cluster runs).
func TestKubeVersionIsTheControlPlanes(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "tools", "build-controlplane.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var built string
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "k8s_version="); ok {
			built = v
		}
	}
	if built != testenv.KubernetesVersion {
		t.Errorf("tools/build-controlplane.sh builds %q, shared/testenv.KubernetesVersion is %q: charts would render for another version than the control plane", built, testenv.KubernetesVersion)
	}
}

// The CRDs and RBAC the charts ship are copies of deploy/; charts/sync.sh --check fails when
// they are stale.
func TestChartsInSyncWithGeneratedFiles(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command(filepath.Join(root, "charts", "sync.sh"), "--check")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("charts/sync.sh --check: %v\n%s", err, out)
	}
}

func TestChartsRejectUnknownValues(t *testing.T) {
	h := newHelm(t)
	for _, c := range allCharts {
		_, err := h.template("r", "charts/"+c, "--set", "replicaCont=2")
		if err == nil || !strings.Contains(err.Error(), "replicaCont") {
			t.Errorf("%s accepted the misspelt value replicaCont (schema not strict): %v", c, err)
		}
	}
}

func TestOperatorChartsRender(t *testing.T) {
	h := newHelm(t)
	for _, svc := range operators {
		t.Run(svc, func(t *testing.T) {
			version := appVersion(t, h.root, svc)
			out, err := h.template("rel", "charts/"+svc, "--namespace", "ops-system")
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			full := "rel-" + svc
			dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", full))
			checkRestrictedDeployment(t, svc, version, dep)
			checkDefaultNodeAgent(t, svc, objs, dep)

			sa := into[corev1.ServiceAccount](t, mustFind(t, objs, "ServiceAccount", full))
			if dep.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("Deployment runs as ServiceAccount %q, chart creates %q", dep.Spec.Template.Spec.ServiceAccountName, sa.Name)
			}
			cr := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full))
			if len(cr.Rules) == 0 {
				t.Error("controller ClusterRole has no rules")
			}
			for _, r := range cr.Rules {
				if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
					t.Errorf("controller ClusterRole has a wildcard rule %+v; RBAC must come from the markers", r)
				}
			}
			crb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", full))
			checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", full, sa.Name, "ops-system")

			role := into[rbacv1.Role](t, mustFind(t, objs, "Role", full+"-leader-election"))
			checkLeaderElectionRole(t, role)
			rb := into[rbacv1.RoleBinding](t, mustFind(t, objs, "RoleBinding", full+"-leader-election"))
			checkBinding(t, rb.RoleRef, rb.Subjects, "Role", role.Name, sa.Name, "ops-system")

			svcObj := into[corev1.Service](t, mustFind(t, objs, "Service", full+"-metrics"))
			if len(svcObj.Spec.Ports) != 1 || svcObj.Spec.Ports[0].Port != 8080 || svcObj.Spec.Ports[0].TargetPort.String() != "metrics" {
				t.Errorf("metrics Service ports %+v, want 8080 -> metrics", svcObj.Spec.Ports)
			}
			for k, v := range svcObj.Spec.Selector {
				if dep.Spec.Template.Labels[k] != v {
					t.Errorf("metrics Service selector %s=%s does not match the pods", k, v)
				}
			}
			if _, ok := find(objs, "ServiceMonitor", ""); ok {
				t.Error("ServiceMonitor rendered although serviceMonitor.enabled defaults to false")
			}
			if _, ok := find(objs, "CustomResourceDefinition", ""); ok {
				t.Error("a CRD is rendered from templates by default; CRDs belong in crds/")
			}

			// Options: ServiceMonitor, pod-IP binding (the local cluster), no leader election.
			out, err = h.template("rel", "charts/"+svc, "--namespace", "ops-system",
				"--set", "serviceMonitor.enabled=true", "--set", "bindPodIP=true", "--set", "leaderElection.enabled=false")
			if err != nil {
				t.Fatal(err)
			}
			objs = decode(t, out)
			mustFind(t, objs, "ServiceMonitor", full)
			dep = into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", full))
			args := dep.Spec.Template.Spec.Containers[0].Args
			for _, want := range []string{"--leader-elect=false", "--metrics-bind-address=$(POD_IP):8080", "--health-probe-bind-address=$(POD_IP):8081"} {
				if !slices.Contains(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			if _, ok := find(objs, "Role", full+"-leader-election"); ok {
				t.Error("leader-election Role rendered with leader election off")
			}
		})
	}
}

func checkRestrictedDeployment(t *testing.T, svc, version string, dep appsv1.Deployment) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := "ghcr.io/opsuite/" + svc + ":" + version; c.Image != want {
		t.Errorf("image %q, want %q (what `make images` tags)", c.Image, want)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container runAsNonRoot is not true")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("container readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("container allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("container is privileged")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("container capabilities %+v: want drop ALL, add none", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("container seccompProfile is not RuntimeDefault")
	}
	for _, want := range []string{"--leader-elect", "--leader-election-id=" + svc + ".opsuite.io", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("container ports %v, want metrics 8080 and health 8081", ports)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path ||
			(p.probe.HTTPGet.Port.String() != "health" && p.probe.HTTPGet.Port.IntValue() != 8081) {
			t.Errorf("%s probe %+v, want HTTP GET %s on port 8081", p.name, p.probe, p.path)
		}
	}
	if c.Resources.Requests == nil {
		t.Error("no resource requests")
	}
}

func checkLeaderElectionRole(t *testing.T, role rbacv1.Role) {
	t.Helper()
	var leases, events bool
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") {
			// What client-go's LeaseLock does, and no more (TestRBACMatchesUse in tools/e2e
			// saw no list, watch or patch of a Lease by any operator).
			if want := []string{"get", "create", "update"}; !sameSet(r.Verbs, want) {
				t.Errorf("leader-election rule on leases: verbs %v, want %v", r.Verbs, want)
			}
			leases = true
		}
		if slices.Contains(r.Resources, "events") {
			// One core Event per leadership taken, never patched into a series, and none
			// of events.k8s.io (controller-runtime's leader election records with the core
			// recorder).
			if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("leader-election rule on events: groups %q verbs %v, want core events create only", r.APIGroups, r.Verbs)
			}
			events = true
		}
	}
	if !leases || !events {
		t.Errorf("leader-election Role %+v: want leases and events create", role.Rules)
	}
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name, sa, ns string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != name {
		t.Errorf("binding refers to %s %s, want %s %s", ref.Kind, ref.Name, kind, name)
	}
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != sa || subjects[0].Namespace != ns {
		t.Errorf("binding subjects %+v, want ServiceAccount %s/%s", subjects, ns, sa)
	}
}

func TestValdChartInstallsValdReleaseCRDOnlyWhenAsked(t *testing.T) {
	h := newHelm(t)
	crds, err := os.ReadDir(filepath.Join(h.root, "charts", "vald-operator", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range crds {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"vald.vdaas.org_valdoperatorreleases.yaml"}) {
		t.Errorf("vald-operator crds/ holds %v, want only the ValdOperatorRelease CRD", names)
	}
	out, err := h.template("rel", "charts/vald-operator", "--set", "installValdReleaseCRD=true")
	if err != nil {
		t.Fatal(err)
	}
	crd := mustFind(t, decode(t, out), "CustomResourceDefinition", "valdreleases.vald.vdaas.org")
	if !bytes.Contains(crd.raw, []byte("helm.sh/resource-policy: keep")) {
		t.Error("ValdRelease CRD is not kept on uninstall by default")
	}
}

func TestNodeAgentChartRenders(t *testing.T) {
	h := newHelm(t)
	version := appVersion(t, h.root, "node-agent")
	out, err := h.template("na", "charts/node-agent", "--namespace", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	full := "na-node-agent"
	ds := into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full))
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	if want := "ghcr.io/opsuite/node-agent:" + version; c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	var nodeName bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("env %+v lacks NODE_NAME from spec.nodeName", c.Env)
	}
	if len(c.Ports) == 0 || c.Ports[0].Name != "grpc" || c.Ports[0].ContainerPort != 9443 {
		t.Errorf("ports %+v, want grpc 9443", c.Ports)
	}
	if !slices.Contains(c.Args, "--listen=:9443") {
		t.Errorf("args %q lack --listen=:9443", c.Args)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe != nil {
		t.Errorf("want a readiness probe and no liveness probe, have %+v / %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("node agent's root filesystem is not read-only")
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["pv-root"]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional || m.MountPath != "/mnt/opsuite" {
		t.Errorf("pv-root mount %+v, want Bidirectional at /mnt/opsuite", m)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if hostPaths["dev"] != "/dev" || hostPaths["pv-root"] != "/mnt/opsuite" {
		t.Errorf("hostPath volumes %v, want /dev and the PV root", hostPaths)
	}
	var noSchedule, noExecute bool
	for _, tol := range pod.Tolerations {
		if tol.Operator == corev1.TolerationOpExists && tol.Key == "" {
			noSchedule = noSchedule || tol.Effect == corev1.TaintEffectNoSchedule
			noExecute = noExecute || tol.Effect == corev1.TaintEffectNoExecute
		}
	}
	if !noSchedule || !noExecute {
		t.Errorf("tolerations %+v do not cover every NoSchedule and NoExecute taint", pod.Tolerations)
	}

	// TLS (per-node by default, shared on request): TestNodeAgentChartPerNodeIdentity.
	mustFind(t, objs, "ConfigMap", full+"-ca")

	own := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full))
	for _, want := range [][2]string{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
		if !hasRule(own.Rules, want[0], want[1], "create") {
			t.Errorf("agent ClusterRole lacks %s %s create", want[0], want[1])
		}
	}
	crb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", full))
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", full, pod.ServiceAccountName, "nodes")

	// What services/node-agent/internal/auth asks SubjectAccessReview for.
	prep := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full+"-preparer"))
	for _, want := range [][2]string{{"nodes", "get"}, {"nodes/disks", "update"}, {"nodes/sysctls", "update"}} {
		if !hasRule(prep.Rules, "nodeagent.opsuite.io", want[0], want[1]) {
			t.Errorf("preparer ClusterRole lacks nodeagent.opsuite.io %s %s", want[0], want[1])
		}
	}
	// Sysctls only (the Memgraph operator): EnsureSysctl and reports, never a disk.
	sysctls := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full+"-sysctls"))
	wantSysctls := []rbacv1.PolicyRule{
		{APIGroups: []string{"nodeagent.opsuite.io"}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"nodeagent.opsuite.io"}, Resources: []string{"nodes/sysctls"}, Verbs: []string{"update"}},
	}
	if !slices.EqualFunc(sysctls.Rules, wantSysctls, equalRule) {
		t.Errorf("sysctls ClusterRole rules %+v, want only %+v", sysctls.Rules, wantSysctls)
	}
	if _, ok := find(objs, "Service", ""); ok {
		t.Error("a Service is rendered by default; clients reach the agent pods directly")
	}

	// With a health listener the readiness probe is gRPC; bindPodIP keeps simulated nodes
	// on one host apart.
	out, err = h.template("na", "charts/node-agent", "--namespace", "nodes",
		"--set", "healthPort=9444", "--set", "bindPodIP=true", "--set", "headlessService.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	objs = decode(t, out)
	ds = into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full))
	c = ds.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.GRPC == nil || c.ReadinessProbe.GRPC.Port != 9444 {
		t.Errorf("readiness probe %+v, want gRPC on 9444", c.ReadinessProbe)
	}
	if !slices.Contains(c.Args, "--listen=$(POD_IP):9443") {
		t.Errorf("args %q lack --listen=$(POD_IP):9443", c.Args)
	}
	svc := into[corev1.Service](t, mustFind(t, objs, "Service", full))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
}

func hasRule(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// TestValdChartPassesOperatorConfiguration checks that chart values reach the operator as
// the environment variables its flags default from, and that empty values stay unset.
func TestValdChartPassesOperatorConfiguration(t *testing.T) {
	h := newHelm(t)
	out, err := h.template("vald-operator", "charts/vald-operator", "--set", "config.REQUIRE_NODEPOOL_MATCH=true",
		"--set", "config.NODEPOOL_LABEL_PREFIX=node.opsuite.io", "--set", "config.PV_MAX_SIZE=0")
	if err != nil {
		t.Fatal(err)
	}
	dep := into[appsv1.Deployment](t, mustFind(t, decode(t, out), "Deployment", "vald-operator"))
	got := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		got[e.Name] = e.Value
	}
	want := map[string]string{"REQUIRE_NODEPOOL_MATCH": "true", "NODEPOOL_LABEL_PREFIX": "node.opsuite.io", "PV_MAX_SIZE": "0"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"DEFAULT_STORAGE_CLASS", "DEFAULT_VALDRELEASE_VALUES", "GATEWAY_INGRESS_ANNOTATIONS"} {
		if _, set := got[k]; set {
			t.Errorf("an empty value was passed to the operator as %s", k)
		}
	}
	if _, err := h.template("vald-operator", "charts/vald-operator", "--set", "config.REQUIRE_NODEPOOL=true"); err == nil {
		t.Error("a misspelt configuration key was accepted")
	}

	// The cluster-wide ValdRelease template and the ingress annotations are objects in the
	// chart's values, passed as JSON.
	out, err = h.template("vald-operator", "charts/vald-operator",
		"--set-json", `defaultValdReleaseValues={"defaults":{"image":{"tag":"v1.8.0"}},"gateway":{"lb":{"hpa":{"enabled":true}}}}`,
		"--set-json", `gatewayIngressAnnotations={"nginx.ingress.kubernetes.io/backend-protocol":"GRPC"}`)
	if err != nil {
		t.Fatal(err)
	}
	dep = into[appsv1.Deployment](t, mustFind(t, decode(t, out), "Deployment", "vald-operator"))
	got = map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		got[e.Name] = e.Value
	}
	for k, v := range map[string]string{
		"DEFAULT_VALDRELEASE_VALUES":  `{"defaults":{"image":{"tag":"v1.8.0"}},"gateway":{"lb":{"hpa":{"enabled":true}}}}`,
		"GATEWAY_INGRESS_ANNOTATIONS": `{"nginx.ingress.kubernetes.io/backend-protocol":"GRPC"}`,
	} {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := h.template("vald-operator", "charts/vald-operator", "--set-json", `gatewayIngressAnnotations={"a":1}`); err == nil {
		t.Error("an annotation that is no string was accepted")
	}
}

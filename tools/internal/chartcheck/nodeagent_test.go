package chartcheck

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Operators that call the node agent by default (nodeAgent.enabled).
var agentCallers = []string{"veltrix-operator", "memgraph-operator"}

// agentRole is the node agent's role each operator chart binds by default (nodeAgent.role):
// the Memgraph operator only raises sysctls, so it may never prepare or release a disk.
var agentRole = map[string]string{
	"vald-operator": "preparer", "veltrix-operator": "preparer", "valkey-operator": "preparer",
	"memgraph-operator": "sysctls",
}

// Where the library mounts what the operator needs to call the agent (values.yaml documents
// them and the NODE_AGENT_* variables).
const (
	tokenDir = "/var/run/secrets/opsuite.io/node-agent/token"
	caDir    = "/var/run/secrets/opsuite.io/node-agent/ca"
)

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func volumeOf(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func mountOf(c corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// nodeAgentObjects are the rendered objects the node-agent wiring adds.
func nodeAgentObjects(objs []object) []string {
	var out []string
	for _, o := range objs {
		if strings.Contains(o.Metadata.Name, "-node-agent-") {
			out = append(out, o.Kind+"/"+o.Metadata.Name)
		}
	}
	return out
}

// checkDefaultNodeAgent checks an operator chart rendered with default values as release
// "rel" in ops-system: wired to the agent release node-agent in namespace node-agent when the
// operator calls it, with nothing of the wiring otherwise.
func checkDefaultNodeAgent(t *testing.T, svc string, objs []object, dep appsv1.Deployment) {
	t.Helper()
	if slices.Contains(agentCallers, svc) {
		checkNodeAgentWiring(t, objs, dep, wiring{
			fullname: "rel-" + svc, namespace: "ops-system", agent: "node-agent", agentNamespace: "node-agent", role: agentRole[svc],
			selector: "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=node-agent", port: "9443",
		})
		return
	}
	if got := nodeAgentObjects(objs); len(got) > 0 {
		t.Errorf("nodeAgent is off by default, yet %v rendered", got)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Volumes) > 0 || len(pod.Containers[0].VolumeMounts) > 0 {
		t.Errorf("volumes %+v mounted with nodeAgent off", pod.Volumes)
	}
	for k := range envOf(pod.Containers[0]) {
		if strings.HasPrefix(k, "NODE_AGENT_") {
			t.Errorf("env %s set with nodeAgent off", k)
		}
	}
}

// wiring is what an operator chart with nodeAgent.enabled must render.
type wiring struct {
	fullname, namespace   string // the operator's release
	agent, agentNamespace string // the agent's fullname and namespace
	selector, port        string
	caConfigMap, audience string // "" when not mounted / the API server's
	expirationSeconds     int64
	role                  string // the agent's role bound cluster-wide; "" means preparer
}

func checkNodeAgentWiring(t *testing.T, objs []object, dep appsv1.Deployment, w wiring) {
	t.Helper()
	if w.expirationSeconds == 0 {
		w.expirationSeconds = 3600
	}
	if w.role == "" {
		w.role = "preparer"
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	sa := pod.ServiceAccountName

	// The projected token, the operator's identity towards the TokenRequest API.
	v := volumeOf(pod, "node-agent-token")
	if v == nil || v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
		t.Fatalf("volume node-agent-token %+v, want a projected ServiceAccount token", v)
	}
	tok := v.Projected.Sources[0].ServiceAccountToken
	if tok.Path != "token" || tok.Audience != w.audience || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != w.expirationSeconds {
		t.Errorf("projected token %+v, want path token, audience %q, %ds", tok, w.audience, w.expirationSeconds)
	}
	if m := mountOf(c, "node-agent-token"); m == nil || m.MountPath != tokenDir || !m.ReadOnly {
		t.Errorf("token mount %+v, want read-only at %s", m, tokenDir)
	}

	// The CA: mounted only from a ConfigMap of the operator's namespace.
	ca := volumeOf(pod, "node-agent-ca")
	env := envOf(c)
	if w.caConfigMap == "" {
		if ca != nil || mountOf(c, "node-agent-ca") != nil {
			t.Errorf("CA volume %+v mounted although no ConfigMap of %s holds the CA", ca, w.namespace)
		}
		if _, set := env["NODE_AGENT_CA_DIR"]; set {
			t.Error("NODE_AGENT_CA_DIR set without a mounted CA")
		}
	} else {
		// Every key (ca.crt and serverName, what shared/nodeagent.DirCA reads).
		if ca == nil || ca.ConfigMap == nil || ca.ConfigMap.Name != w.caConfigMap || len(ca.ConfigMap.Items) != 0 {
			t.Errorf("CA volume %+v, want all of ConfigMap %s", ca, w.caConfigMap)
		}
		if m := mountOf(c, "node-agent-ca"); m == nil || m.MountPath != caDir || !m.ReadOnly {
			t.Errorf("CA mount %+v, want read-only at %s", m, caDir)
		}
		if env["NODE_AGENT_CA_DIR"] != caDir {
			t.Errorf("NODE_AGENT_CA_DIR = %q, want %s", env["NODE_AGENT_CA_DIR"], caDir)
		}
	}
	for k, want := range map[string]string{
		"NODE_AGENT_NAMESPACE":    w.agentNamespace,
		"NODE_AGENT_SELECTOR":     w.selector,
		"NODE_AGENT_PORT":         w.port,
		"NODE_AGENT_CA_CONFIGMAP": w.agent + "-ca",
		"NODE_AGENT_TOKEN_FILE":   tokenDir + "/token",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}

	// RBAC: exactly these four objects.
	want := []string{
		"ClusterRoleBinding/" + w.fullname + "-node-agent-" + w.role,
		"RoleBinding/" + w.fullname + "-node-agent-client",
		"Role/" + w.fullname + "-node-agent-token",
		"RoleBinding/" + w.fullname + "-node-agent-token",
	}
	if got := nodeAgentObjects(objs); !sameSet(got, want) {
		t.Errorf("node-agent objects %v, want %v", got, want)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", w.fullname+"-node-agent-"+w.role))
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", w.agent+"-"+w.role, sa, w.namespace)
	client := into[rbacv1.RoleBinding](t, mustFind(t, objs, "RoleBinding", w.fullname+"-node-agent-client"))
	if client.Namespace != w.agentNamespace {
		t.Errorf("RoleBinding %s in namespace %q, want the agent's %q", client.Name, client.Namespace, w.agentNamespace)
	}
	checkBinding(t, client.RoleRef, client.Subjects, "ClusterRole", w.agent+"-client", sa, w.namespace)
	role := into[rbacv1.Role](t, mustFind(t, objs, "Role", w.fullname+"-node-agent-token"))
	wantRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{sa}, Verbs: []string{"create"}}
	if role.Namespace != w.namespace || len(role.Rules) != 1 || !equalRule(role.Rules[0], wantRule) {
		t.Errorf("Role %s/%s rules %+v, want only %+v", role.Namespace, role.Name, role.Rules, wantRule)
	}
	rb := into[rbacv1.RoleBinding](t, mustFind(t, objs, "RoleBinding", w.fullname+"-node-agent-token"))
	if rb.Namespace != w.namespace {
		t.Errorf("RoleBinding %s in %q, want %q", rb.Name, rb.Namespace, w.namespace)
	}
	checkBinding(t, rb.RoleRef, rb.Subjects, "Role", role.Name, sa, w.namespace)
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.Verbs, b.Verbs) && len(a.NonResourceURLs) == 0
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The roles an operator binds are those the node-agent chart defines, for any agent release
// name (the agent's fullname drops the chart name when the release holds it), and the CA
// ConfigMap is where the client role lets the operator read it.
func TestNodeAgentRolesOperatorsBindExist(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct{ release, fullname string }{
		{"node-agent", "node-agent"}, {"na", "na-node-agent"}, {"my-node-agent", "my-node-agent"},
	} {
		t.Run(tc.release, func(t *testing.T) {
			out, err := h.template(tc.release, "charts/node-agent", "--namespace", "agents")
			if err != nil {
				t.Fatal(err)
			}
			agentObjs := decode(t, out)
			out, err = h.template("vx", "charts/veltrix-operator", "--namespace", "ops",
				"--set", "nodeAgent.release="+tc.release, "--set", "nodeAgent.namespace=agents")
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			crb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", "vx-veltrix-operator-node-agent-preparer"))
			mustFind(t, agentObjs, "ClusterRole", crb.RoleRef.Name)
			if crb.RoleRef.Name != tc.fullname+"-preparer" {
				t.Errorf("binds %s, want %s-preparer", crb.RoleRef.Name, tc.fullname)
			}
			rb := into[rbacv1.RoleBinding](t, mustFind(t, objs, "RoleBinding", "vx-veltrix-operator-node-agent-client"))
			client := into[rbacv1.ClusterRole](t, mustFind(t, agentObjs, "ClusterRole", rb.RoleRef.Name))
			cm := into[corev1.ConfigMap](t, mustFind(t, agentObjs, "ConfigMap", tc.fullname+"-ca"))
			if cm.Namespace != rb.Namespace || cm.Data["ca.crt"] == "" || cm.Data["serverName"] == "" {
				t.Errorf("CA ConfigMap %s/%s keys %v; the operator's RoleBinding is in %s", cm.Namespace, cm.Name, slices.Sorted(maps.Keys(cm.Data)), rb.Namespace)
			}
			var readsCA bool
			for _, r := range client.Rules {
				readsCA = readsCA || (slices.Contains(r.Resources, "configmaps") && slices.Contains(r.ResourceNames, cm.Name) && slices.Contains(r.Verbs, "get"))
			}
			if !readsCA {
				t.Errorf("%s does not let the operator read %s: %+v", client.Name, cm.Name, client.Rules)
			}
			dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "vx-veltrix-operator"))
			if got := envOf(dep.Spec.Template.Spec.Containers[0])["NODE_AGENT_CA_CONFIGMAP"]; got != cm.Name {
				t.Errorf("NODE_AGENT_CA_CONFIGMAP = %q, want %s", got, cm.Name)
			}
			ds := into[appsv1.DaemonSet](t, mustFind(t, agentObjs, "DaemonSet", tc.fullname))
			sel := envOf(dep.Spec.Template.Spec.Containers[0])["NODE_AGENT_SELECTOR"]
			for _, kv := range strings.Split(sel, ",") {
				k, v, _ := strings.Cut(kv, "=")
				if ds.Spec.Template.Labels[k] != v {
					t.Errorf("NODE_AGENT_SELECTOR %q does not select the agent pods (labels %v)", sel, ds.Spec.Template.Labels)
				}
			}
		})
	}
}

func TestNodeAgentWiringOptions(t *testing.T) {
	h := newHelm(t)
	render := func(t *testing.T, chart, ns string, sets ...string) []object {
		t.Helper()
		args := []string{"rel", "charts/" + chart, "--namespace", ns}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		out, err := h.template(args...)
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, out)
	}
	t.Run("same namespace mounts the agent's CA", func(t *testing.T) {
		objs := render(t, "memgraph-operator", "agents", "nodeAgent.release=na", "nodeAgent.namespace=agents",
			"nodeAgent.port=9555", "nodeAgent.token.audience=https://kubernetes.default.svc", "nodeAgent.token.expirationSeconds=7200")
		dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "rel-memgraph-operator"))
		checkNodeAgentWiring(t, objs, dep, wiring{
			fullname: "rel-memgraph-operator", namespace: "agents", agent: "na-node-agent", agentNamespace: "agents", role: "sysctls",
			selector: "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=na", port: "9555",
			caConfigMap: "na-node-agent-ca", audience: "https://kubernetes.default.svc", expirationSeconds: 7200,
		})
	})
	t.Run("a CA ConfigMap of the operator's namespace", func(t *testing.T) {
		objs := render(t, "veltrix-operator", "ops", "nodeAgent.caConfigMap=agent-trust", "nodeAgent.fullname=agent")
		dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "rel-veltrix-operator"))
		checkNodeAgentWiring(t, objs, dep, wiring{
			fullname: "rel-veltrix-operator", namespace: "ops", agent: "agent", agentNamespace: "node-agent",
			selector: "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=node-agent", port: "9443",
			caConfigMap: "agent-trust",
		})
	})
	t.Run("vald opted in keeps its configuration and pod-IP binding", func(t *testing.T) {
		objs := render(t, "vald-operator", "ops", "nodeAgent.enabled=true", "bindPodIP=true", "config.PV_MAX_SIZE=0")
		dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "rel-vald-operator"))
		checkNodeAgentWiring(t, objs, dep, wiring{
			fullname: "rel-vald-operator", namespace: "ops", agent: "node-agent", agentNamespace: "node-agent",
			selector: "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=node-agent", port: "9443",
		})
		c := dep.Spec.Template.Spec.Containers[0]
		if env := envOf(c); env["PV_MAX_SIZE"] != "0" {
			t.Errorf("env %v lacks PV_MAX_SIZE=0", env)
		}
		var podIP bool
		for _, e := range c.Env {
			podIP = podIP || (e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP")
		}
		if !podIP || !slices.Contains(c.Args, "--metrics-bind-address=$(POD_IP):8080") {
			t.Errorf("bindPodIP=true: env %+v args %q, want POD_IP from status.podIP bound by the listeners", c.Env, c.Args)
		}
	})
	t.Run("rbac.create=false binds nothing", func(t *testing.T) {
		objs := render(t, "veltrix-operator", "ops", "rbac.create=false")
		if got := nodeAgentObjects(objs); len(got) > 0 {
			t.Errorf("rbac.create=false rendered %v", got)
		}
		mustFind(t, objs, "Deployment", "rel-veltrix-operator")
	})
	t.Run("schema", func(t *testing.T) {
		for _, bad := range []string{"nodeAgent.namespace=Bad_NS", "nodeAgent.token.expirationSeconds=60", "nodeAgent.unknown=1", "nodeAgent.release="} {
			if _, err := h.template("rel", "charts/veltrix-operator", "--set", bad); err == nil {
				t.Errorf("--set %s accepted", bad)
			}
		}
	})
}

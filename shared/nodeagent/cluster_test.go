package nodeagent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/testenv"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var env *testenv.Env

// TestMain gives these tests a real kube-apiserver: field selectors, caches, TokenRequest
// and RBAC are the apiserver's, not a fake's.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	agentNS    = "opsuite-system"
	callerNS   = "caller"
	callerName = "operator"
	caName     = "node-agent-ca"
)

var agentLabels = map[string]string{"app.kubernetes.io/name": "node-agent"}

// caller makes, once, the caller's ServiceAccount with exactly the RBAC the package
// documents (token for itself; pods and the CA ConfigMap in the agent's namespace), and
// returns a rest.Config acting as it.
func caller(t *testing.T, cs kubernetes.Interface) *rest.Config {
	t.Helper()
	ctx := context.Background()
	create := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{agentNS, callerNS} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		create(err)
	}
	_, err := cs.CoreV1().ServiceAccounts(callerNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: callerName}}, metav1.CreateOptions{})
	create(err)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: callerName, Namespace: callerNS}}
	roles := map[string]*rbacv1.Role{
		callerNS: {ObjectMeta: metav1.ObjectMeta{Name: "own-token"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{callerName}, Verbs: []string{"create"}},
		}},
		// As charts/node-agent's <release>-client ClusterRole.
		agentNS: {ObjectMeta: metav1.ObjectMeta{Name: "node-agent-client"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{caName}, Verbs: []string{"get", "watch"}},
		}},
	}
	for ns, role := range roles {
		_, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
		create(err)
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   subject,
		}, metav1.CreateOptions{})
		create(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(callerNS).CreateToken(ctx, callerName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	create(err)
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestInCluster runs the library as an operator does, with only the documented RBAC: agent
// pods found through a cache, the CA from the chart's ConfigMap, a token per node from
// TokenRequest, one connection per node, closed when the pod moves or goes.
func TestInCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := admin(t)
	cfg := caller(t, cs)
	pki := newPKI(t)

	// Two agents on the same port of two loopback addresses: one pod, before and after a move.
	agent1 := &scriptedAgent{node: "node-a"}
	addr1 := serveTLS(t, agent1, pki.Cert, "127.0.0.1:0")
	_, portStr, _ := net.SplitHostPort(addr1)
	port, _ := strconv.Atoi(portStr)
	agent2 := &scriptedAgent{node: "node-a"}
	serveTLS(t, agent2, pki.Cert, net.JoinHostPort("127.0.0.2", portStr))

	_, err := cs.CoreV1().ConfigMaps(agentNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: caName},
		Data:       map[string]string{nodeagent.CAKey: string(pki.CAPEM), nodeagent.ServerNameKey: serverName},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Agent pods on two nodes, as the DaemonSet makes them; only node-a's is ready. A pod
	// of something else on node-a must not be taken for the agent.
	pod := func(name, node, ip string, ready bool, podLabels map[string]string) *corev1.Pod {
		p, err := cs.CoreV1().Pods(agentNS).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: podLabels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent", Image: "node-agent"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return setStatus(t, cs, p, ip, ready)
	}
	podA := pod("node-agent-a", "node-a", "127.0.0.1", true, agentLabels)
	pod("node-agent-b", "node-b", "127.0.0.1", false, agentLabels)
	pod("other-c", "node-c", "127.0.0.1", true, map[string]string{"app": "other"})

	// The operator's cache, limited to the agent's pods, indexed by node, as the caller.
	sel := labels.SelectorFromSet(agentLabels)
	podCache, err := cache.New(cfg, cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: nodeagent.PodCacheByObject(agentNS, sel)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeagent.IndexPodsByNode(ctx, podCache); err != nil {
		t.Fatal(err)
	}
	go func() { _ = podCache.Start(ctx) }()
	if !podCache.WaitForCacheSync(ctx) {
		t.Fatal("the pod cache did not sync")
	}
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := nodeagent.NewTokenRequester(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t, nodeagent.Config{
		Resolver: &nodeagent.PodResolver{Pods: podCache, Namespace: agentNS, Selector: sel, Port: port},
		CA:       nodeagent.ConfigMapCA{Reader: direct, Namespace: agentNS, Name: caName},
		Tokens:   tokens, Options: fast,
	})
	a := p.Node("node-a")
	report := func() (*nodeagentv1.GetNodeReportResponse, error) {
		return a.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	}
	for range 3 {
		if rep, err := report(); err != nil || rep.NodeName != "node-a" {
			t.Fatalf("%v, %v", rep, err)
		}
	}
	calls, sent, peers := agent1.stats()
	if calls != 3 || peers != 1 || p.Connections() != 1 {
		t.Fatalf("%d calls over %d connections (pool: %d), want 3 over 1", calls, peers, p.Connections())
	}
	// The token is node-a's, minted for the caller, and reused while fresh.
	if !slices.Equal(sent, []string{sent[0], sent[0], sent[0]}) {
		t.Fatal("a fresh token was minted for every call")
	}
	review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: sent[0][len("Bearer "):], Audiences: []string{contract.Audience("node-a")},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:caller:operator" {
		t.Fatalf("the token sent to node-a's agent: %+v", review.Status)
	}

	for _, node := range []string{"node-b", "node-c"} {
		if _, err := p.Node(node).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); !errors.Is(err, nodeagent.ErrNoAgent) {
			t.Fatalf("%s has no ready agent, got %v", node, err)
		}
	}

	// The pod moves to 127.0.0.2: the next call reaches it on a new connection.
	setStatus(t, cs, podA, "127.0.0.2", true)
	waitFor(t, "the cache to see the new pod IP", func() bool {
		var got corev1.Pod
		return podCache.Get(ctx, client.ObjectKeyFromObject(podA), &got) == nil && got.Status.PodIP == "127.0.0.2"
	})
	if rep, err := report(); err != nil || rep.NodeName != "node-a" {
		t.Fatalf("after the move: %v, %v", rep, err)
	}
	if c1, _, _ := agent1.stats(); c1 != 3 {
		t.Fatalf("the old address got %d calls after the move", c1-3)
	}
	if c2, _, _ := agent2.stats(); c2 != 1 || p.Connections() != 1 {
		t.Fatalf("the new address got %d calls; pool holds %d connections", c2, p.Connections())
	}

	// The pod goes: no agent, and the connection is closed.
	if err := cs.CoreV1().Pods(agentNS).Delete(ctx, podA.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to drop the pod", func() bool {
		return podCache.Get(ctx, client.ObjectKeyFromObject(podA), &corev1.Pod{}) != nil
	})
	if _, err := report(); !errors.Is(err, nodeagent.ErrNoAgent) {
		t.Fatalf("after the pod went: %v", err)
	}
	if p.Connections() != 0 {
		t.Fatalf("%d connections kept to a node without an agent", p.Connections())
	}

	t.Run("NewForManager", func(t *testing.T) {
		// The chart's release "node-agent": pods labelled by name and instance, CA in
		// ConfigMap node-agent-ca; the manager runs as the caller.
		agents := nodeagent.Release{Namespace: agentNS, Name: "node-agent", Port: port}.Agents()
		if agents.CAConfigMap != caName || agents.Selector.String() != "app.kubernetes.io/instance=node-agent,app.kubernetes.io/name=node-agent" {
			t.Fatalf("release node-agent: %+v", agents)
		}
		pod("node-agent-d", "node-d", "127.0.0.1", true, map[string]string{
			"app.kubernetes.io/name": "node-agent", "app.kubernetes.io/instance": "node-agent",
		})
		mgr, err := manager.New(cfg, manager.Options{
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		})
		if err != nil {
			t.Fatal(err)
		}
		pool, err := nodeagent.NewForManager(mgr, agents, fast)
		if err != nil {
			t.Fatal(err)
		}
		mctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		before, _, _ := agent1.stats()
		// The pod of node-d is served by node-a's scripted agent, whose report names node-a:
		// the call reaches it, and the client refuses a report of another node.
		var wrong *nodeagent.WrongNodeError
		waitFor(t, "node-d's agent through the manager's pool", func() bool {
			_, err := pool.Node("node-d").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			return errors.As(err, &wrong)
		})
		if wrong.Asked != "node-d" || wrong.Reported != "node-a" {
			t.Fatalf("wrong-node error %+v, want node-d asked and node-a reported", wrong)
		}
		if after, sent, _ := agent1.stats(); after != before+1 {
			t.Fatalf("the agent saw %d calls", after-before)
		} else if aud := tokenAudiences(t, cs, sent[len(sent)-1]); !slices.Equal(aud, []string{contract.Audience("node-d")}) {
			t.Fatalf("token audiences %v", aud)
		}
		if _, err := pool.Node("node-b").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); !errors.Is(err, nodeagent.ErrNoAgent) {
			t.Fatalf("node-b (another release's pod, not ready): %v", err)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if pool.Connections() != 0 {
			t.Fatal("the pool outlived the manager")
		}
	})
}

// tokenAudiences reviews a sent "Bearer <token>" for every audience of nodes a to d.
func tokenAudiences(t *testing.T, cs kubernetes.Interface, header string) []string {
	t.Helper()
	var auds []string
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		auds = append(auds, contract.Audience(n))
	}
	rev, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: strings.TrimPrefix(header, "Bearer "), Audiences: auds,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Status.Authenticated {
		t.Fatalf("review: %+v", rev.Status)
	}
	return rev.Status.Audiences
}

func setStatus(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
	}
	p, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestTokenRequester(t *testing.T) {
	ctx := context.Background()
	cs := admin(t)
	const ns, sa = "tokens", "minter"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := nodeagent.NewTokenRequester(env.Config, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r.SetClock(func() time.Time { return now })
	audience := func(tok string) []string {
		t.Helper()
		rev, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
			Token: tok, Audiences: []string{contract.Audience("node-a"), contract.Audience("node-b")},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:tokens:minter" {
			t.Fatalf("review: %+v", rev.Status)
		}
		return rev.Status.Audiences
	}
	a1, err := r.Token(ctx, contract.Audience("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := audience(a1); !slices.Equal(got, []string{contract.Audience("node-a")}) {
		t.Fatalf("node-a's token has audiences %v", got)
	}
	b1, _ := r.Token(ctx, contract.Audience("node-b"))
	if got := audience(b1); !slices.Equal(got, []string{contract.Audience("node-b")}) {
		t.Fatalf("node-b's token has audiences %v", got)
	}
	// Reused while fresh; renewed when a fifth of its 10 minutes is left.
	now = now.Add(7 * time.Minute)
	if a2, _ := r.Token(ctx, contract.Audience("node-a")); a2 != a1 {
		t.Fatal("renewed a fresh token")
	}
	now = now.Add(90 * time.Second)
	if a3, _ := r.Token(ctx, contract.Audience("node-a")); a3 == a1 {
		t.Fatal("kept a token with less than a fifth of its life left")
	}

	t.Run("own ServiceAccount from the client's token", func(t *testing.T) {
		tok, _ := r.Token(ctx, "https://kubernetes.default.svc")
		dir := t.TempDir()
		file := filepath.Join(dir, "token")
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		gotNS, gotName, err := nodeagent.ServiceAccountOf(&rest.Config{BearerTokenFile: file})
		if err != nil || gotNS != ns || gotName != sa {
			t.Fatalf("%s/%s, %v", gotNS, gotName, err)
		}
		if _, _, err := nodeagent.ServiceAccountOf(env.Config); err == nil {
			t.Fatal("an admin's client certificate taken for a ServiceAccount")
		}
	})
	t.Run("without RBAC for its own token", func(t *testing.T) {
		tok, _ := r.Token(ctx, "https://kubernetes.default.svc")
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tok
		self, err := nodeagent.NewTokenRequester(cfg, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := self.Token(ctx, contract.Audience("node-a")); err == nil {
			t.Fatal("minted a token without create on serviceaccounts/token")
		}
	})
}

func TestCASources(t *testing.T) {
	pki := newPKI(t)
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(nodeagent.CAKey, string(pki.CAPEM))
	write(nodeagent.ServerNameKey, serverName+"\n")
	pool, name, err := nodeagent.DirCA(dir).CA(context.Background())
	if err != nil || name != serverName || !pool.Equal(pki.Pool) {
		t.Fatalf("%v %q %v", pool, name, err)
	}
	write(nodeagent.CAKey, "not PEM")
	if _, _, err := nodeagent.DirCA(dir).CA(context.Background()); err == nil {
		t.Fatal("accepted a CA file without a certificate")
	}
	ctx := context.Background()
	cs := admin(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ca-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ca-test").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "no-name"}, Data: map[string]string{nodeagent.CAKey: string(pki.CAPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"no-name", "missing"} {
		if _, _, err := (nodeagent.ConfigMapCA{Reader: env.Client, Namespace: "ca-test", Name: name}).CA(ctx); err == nil {
			t.Fatalf("ConfigMap %s gave a CA", name)
		}
	}
}

func TestAgentsFromEnv(t *testing.T) {
	set := func(kv map[string]string) {
		for _, k := range []string{nodeagent.EnvNamespace, nodeagent.EnvSelector, nodeagent.EnvPort, nodeagent.EnvCAConfigMap, nodeagent.EnvCADir, nodeagent.EnvTokenFile} {
			t.Setenv(k, kv[k])
		}
	}
	set(map[string]string{
		nodeagent.EnvNamespace: "opsuite-system", nodeagent.EnvSelector: "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=na",
		nodeagent.EnvPort: "7443", nodeagent.EnvCAConfigMap: "na-node-agent-ca", nodeagent.EnvCADir: "/etc/node-agent-ca",
		nodeagent.EnvTokenFile: "/var/run/secrets/node-agent/token",
	})
	a, err := nodeagent.AgentsFromEnv()
	if err != nil || a.Namespace != "opsuite-system" || a.Port != 7443 || a.CAConfigMap != "na-node-agent-ca" ||
		a.CADir != "/etc/node-agent-ca" || a.TokenFile != "/var/run/secrets/node-agent/token" ||
		!a.Selector.Matches(labels.Set{"app.kubernetes.io/name": "node-agent", "app.kubernetes.io/instance": "na"}) {
		t.Fatalf("%+v, %v", a, err)
	}
	set(map[string]string{nodeagent.EnvSelector: "a in (", nodeagent.EnvPort: "http"})
	_, err = nodeagent.AgentsFromEnv()
	for _, want := range []string{nodeagent.EnvNamespace, nodeagent.EnvSelector, nodeagent.EnvPort, nodeagent.EnvCAConfigMap} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

package nodeagent_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var env *testenv.Env

// TestMain gives the discovery test a real kube-apiserver: field selectors on spec.nodeName
// and pod status are the apiserver's, not a fake's.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

func TestDialFindsTheAgentPodOnTheNode(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const name = "node-agent.opsuite-system.svc"
	pki := newPKI(t, name)
	agent := &scriptedAgent{}
	addr := serveTLS(t, agent, pki.server)
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	const agentNS = "opsuite-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Agent pods on two nodes, as the DaemonSet makes them; only node-a's is ready.
	pod := func(podName, node, ip string, ready bool) {
		p, err := cs.CoreV1().Pods(agentNS).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app.kubernetes.io/name": "node-agent"}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent", Image: "node-agent"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		p.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
		}
		if _, err := cs.CoreV1().Pods(agentNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("node-agent-a", "node-a", "127.0.0.1", true)
	pod("node-agent-b", "node-b", "127.0.0.2", false)

	d := &nodeagent.Dialer{
		Kube: cs, Namespace: agentNS, Selector: "app.kubernetes.io/name=node-agent", Port: port,
		RootCAs: pki.pool, ServerName: name, Tokens: counterTokens(), Options: fast,
	}
	c, err := d.Dial(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil || rep.NodeName != "node-a" {
		t.Fatalf("%v, %v", rep, err)
	}
	if _, err := d.Dial(ctx, "node-b"); !errors.Is(err, nodeagent.ErrNoAgent) {
		t.Fatalf("node-b's agent is not ready, got %v", err)
	}
	if _, err := d.Dial(ctx, "node-c"); !errors.Is(err, nodeagent.ErrNoAgent) {
		t.Fatalf("node-c has no agent, got %v", err)
	}
}

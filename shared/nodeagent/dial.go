package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// ErrNoAgent means no ready agent pod runs on the node.
var ErrNoAgent = errors.New("no ready node-agent pod on the node")

// Dialer reaches the agent of a node through its pod.
type Dialer struct {
	// Kube lists the agent's pods.
	Kube kubernetes.Interface
	// Namespace and Selector find the agent's pods (the DaemonSet's namespace and labels).
	Namespace string
	Selector  string
	// Port is the agent's gRPC port.
	Port int
	// RootCAs verifies the agent's certificate (the chart's CA).
	RootCAs *x509.CertPool
	// ServerName is the name the agent's certificate carries; pod IPs change, so the
	// certificate names the service, not the pod.
	ServerName string
	// Tokens supplies the bearer token of each call.
	Tokens TokenSource
	// Options tune the calls.
	Options Options
}

// Dial finds the ready agent pod on nodeName and connects to it. The connection is lazy: an
// unreachable agent shows as Unavailable on the first call, which the client retries.
func (d *Dialer) Dial(ctx context.Context, nodeName string) (*Client, error) {
	addr, err := d.agentAddress(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return d.DialAddress(addr)
}

// DialAddress connects to an agent at host:port with the Dialer's TLS and tokens.
func (d *Dialer) DialAddress(addr string) (*Client, error) {
	if d.RootCAs == nil || d.ServerName == "" || d.Tokens == nil {
		return nil, errors.New("nodeagent: RootCAs, ServerName and Tokens are required")
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: d.RootCAs, ServerName: d.ServerName, MinVersion: tls.VersionTLS12})
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(tokenCredentials{src: d.Tokens, secure: true}))
	if err != nil {
		return nil, fmt.Errorf("nodeagent: dialing %s: %w", addr, err)
	}
	c := New(cc, d.Options)
	c.close = cc.Close
	return c, nil
}

func (d *Dialer) agentAddress(ctx context.Context, nodeName string) (string, error) {
	pods, err := d.Kube.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: d.Selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return "", fmt.Errorf("nodeagent: listing agent pods on node %s: %w", nodeName, err)
	}
	// During a rolling update two pods may share a node; prefer the newest ready one.
	items := pods.Items
	sort.Slice(items, func(i, j int) bool {
		return items[j].CreationTimestamp.Before(&items[i].CreationTimestamp)
	})
	for _, p := range items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(&p) {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(d.Port)), nil
		}
	}
	return "", fmt.Errorf("nodeagent: node %s: %w", nodeName, ErrNoAgent)
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

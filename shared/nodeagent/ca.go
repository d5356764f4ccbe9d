package nodeagent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the node-agent chart's ConfigMap <release>-ca (and files, when it is mounted).
const (
	CAKey         = "ca.crt"
	ServerNameKey = "serverName"
)

// CASource gives the CA that signed the agents' certificate and the name the certificate
// carries (pod IPs change, so it names the service, not the pod). A name "*.<name>" means
// each agent's certificate names its own node, "<node>.<name>" (contract.NodeServerName),
// and a Pool verifies exactly that name for the node it calls. A Pool asks it for every new
// connection.
type CASource interface {
	CA(ctx context.Context) (*x509.CertPool, string, error)
}

// ConfigMapCA reads the chart's ConfigMap <release>-ca. Reader is typically the manager's
// APIReader (get on that one ConfigMap is enough); a cache would need list and watch.
type ConfigMapCA struct {
	Reader    client.Reader
	Namespace string
	Name      string
}

// CA implements CASource.
func (c ConfigMapCA) CA(ctx context.Context) (*x509.CertPool, string, error) {
	var cm corev1.ConfigMap
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, &cm); err != nil {
		return nil, "", fmt.Errorf("reading ConfigMap %s/%s: %w", c.Namespace, c.Name, err)
	}
	return parseCA(cm.Data[CAKey], cm.Data[ServerNameKey], "ConfigMap "+c.Namespace+"/"+c.Name)
}

// DirCA reads the chart's ConfigMap mounted as a volume at this directory (files ca.crt and
// serverName); a rotated CA is picked up by the next connection.
type DirCA string

// CA implements CASource.
func (d DirCA) CA(context.Context) (*x509.CertPool, string, error) {
	pem, err := os.ReadFile(filepath.Join(string(d), CAKey))
	if err != nil {
		return nil, "", err
	}
	name, err := os.ReadFile(filepath.Join(string(d), ServerNameKey))
	if err != nil {
		return nil, "", err
	}
	return parseCA(string(pem), string(name), string(d))
}

// StaticCA is a CA already loaded.
type StaticCA struct {
	Pool       *x509.CertPool
	ServerName string
}

// CA implements CASource.
func (s StaticCA) CA(context.Context) (*x509.CertPool, string, error) {
	if s.Pool == nil || s.ServerName == "" {
		return nil, "", errors.New("StaticCA needs a pool and a server name")
	}
	return s.Pool, s.ServerName, nil
}

func parseCA(pem, serverName, from string) (*x509.CertPool, string, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pem)) {
		return nil, "", fmt.Errorf("%s: no PEM certificate in %s", from, CAKey)
	}
	serverName = strings.TrimSpace(serverName)
	if serverName == "" {
		return nil, "", fmt.Errorf("%s: %s is empty", from, ServerNameKey)
	}
	return pool, serverName, nil
}

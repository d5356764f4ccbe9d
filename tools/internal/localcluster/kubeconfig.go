package localcluster

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig for the client identity id with the certificates
// embedded, so the file can be copied elsewhere.
func (o *Options) writeKubeconfig(path, id string) error {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(o.PKIDir(), name))
		return base64.StdEncoding.EncodeToString(data), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read(id + ".crt")
	if err != nil {
		return err
	}
	key, err := read(id + ".key")
	if err != nil {
		return err
	}
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: localcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: localcluster
  context:
    cluster: localcluster
    user: %s
current-context: localcluster
`, o.APIServerURL(), ca, id, crt, key, id)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (o *Options) componentKubeconfig(id string) string {
	return filepath.Join(o.PKIDir(), id+".kubeconfig")
}

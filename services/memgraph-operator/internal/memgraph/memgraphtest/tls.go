package memgraphtest

import "github.com/opsuite/suite/shared/testenv"

// BoltTLSArgs are the simulator flags that serve Bolt over TLS with the certificate and
// key of f (what a testenv.CA's WriteFiles wrote): --bolt-cert-file and --bolt-key-file.
func BoltTLSArgs(f testenv.TLSFiles) []string {
	return []string{"--bolt-cert-file=" + f.Cert, "--bolt-key-file=" + f.Key}
}

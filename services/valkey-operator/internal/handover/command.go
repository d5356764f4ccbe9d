package handover

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// Subcommands of the operator's binary.
const (
	// CommandHandover is the preStop hook (Command).
	CommandHandover = resources.HandoverCommand
	// CommandInstall copies the binary for the hook (Install).
	CommandInstall = resources.HandoverInstallCommand
)

// Command is the preStop hook's command line: it reads the replication user's credentials
// and, with --tls-dir, the cluster's CA and this member's certificate, then runs Run.
func Command(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(CommandHandover, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", net.JoinHostPort(os.Getenv("POD_IP"), strconv.Itoa(resources.ClientPort)), "this member's server, host:port")
	auth := fs.String("auth-file", filepath.Join(resources.ACLDir, resources.ACLKeyAuth), "auth.conf with the replication user's masteruser and masterauth")
	tlsDir := fs.String("tls-dir", "", "directory of ca.crt, tls.crt and tls.key when the server uses TLS")
	timeout := fs.Duration("timeout", 20*time.Second, "how long the hand-over may take")
	linger := fs.Duration("linger", time.Second, "how long to keep the server answering (MOVED) after its slots moved, within the timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*auth)
	if err != nil {
		return err
	}
	user, pass, err := ReadAuth(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *auth, err)
	}
	o := valkey.Options{Username: user, Password: pass, DialTimeout: 2 * time.Second}
	if *tlsDir != "" {
		ca, err := os.ReadFile(filepath.Join(*tlsDir, resources.TLSKeyCA))
		if err != nil {
			return err
		}
		if o.TLS, err = connect.ClientTLS(ca); err != nil {
			return err
		}
		if err := ClientCertificate(o.TLS, filepath.Join(*tlsDir, resources.TLSKeyCert), filepath.Join(*tlsDir, resources.TLSKeyKey)); err != nil {
			return err
		}
	}
	return Run(ctx, Config{Addr: *addr, Options: o, Timeout: *timeout, Linger: *linger, Log: stderr})
}

// Install copies the running binary to the path in args (the init container's emptyDir),
// executable by every user: the server container may run as another user than this one.
func Install(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: " + CommandInstall + " <destination file>")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	dst := args[0]
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".install-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

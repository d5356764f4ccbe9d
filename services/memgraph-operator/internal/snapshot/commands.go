package snapshot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/opsuite/suite/shared/objectstore"
)

// The subcommands of the operator's binary that data-instance pods run.
const (
	// CommandAgent is the backup agent sidecar.
	CommandAgent = "backup-agent"
	// CommandRestore is the restore init container.
	CommandRestore = "restore"
)

// AgentCommand runs the backup agent until ctx ends: memgraph-operator backup-agent
// --data-dir=/var/lib/memgraph --listen=:7690 --token-file=/etc/memgraph-backup/token.
func AgentCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(CommandAgent, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "/var/lib/memgraph", "Memgraph's data directory, mounted read-only")
	listen := fs.String("listen", ":7690", "address to serve on")
	tokenFile := fs.String("token-file", "/etc/memgraph-backup/token", "file holding the bearer token callers present")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: (&Agent{DataDir: *dataDir, TokenFile: *tokenFile}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	_, _ = fmt.Fprintf(stderr, "backup agent serving %s on %s\n", *dataDir, ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Environment of the restore init container: the object store's keys (from the
// credentials Secret, by secretKeyRef) and the pod's ordinal (the downward API).
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
	EnvPodIndex        = "POD_INDEX"
)

// RestoreCommand is the init container: on the pod of ordinal --ordinal (the MAIN to be)
// it downloads the backup into the data directory; on any other pod it does nothing (the
// replicas sync from the MAIN). It exits non-zero, with the reason in the termination
// message, when the backup is corrupted or the volume already holds data.
func RestoreCommand(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(CommandRestore, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s objectstore.Settings
	dataDir := fs.String("data-dir", "/var/lib/memgraph", "Memgraph's data directory")
	backup := fs.String("backup-path", "", "the backup's folder in the bucket (its manifest is <folder>/manifest.json)")
	ordinal := fs.String("ordinal", "0", "the pod ordinal that restores; others return at once")
	caFile := fs.String("ca-file", "", "PEM CA of an https endpoint signed by a private CA")
	termination := fs.String("termination-log", "/dev/termination-log", "where the failure reason is written for the pod's status")
	fs.StringVar(&s.Endpoint, "endpoint", "", "S3 endpoint URL")
	fs.StringVar(&s.Bucket, "bucket", "", "bucket")
	fs.StringVar(&s.Region, "region", "", "region")
	fs.BoolVar(&s.PathStyle, "path-style", false, "path-style requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if idx := getenv(EnvPodIndex); idx != *ordinal {
		_, _ = fmt.Fprintf(stderr, "pod ordinal %q is not %s: nothing to restore here, the replicas sync from the MAIN\n", idx, *ordinal)
		return nil
	}
	fail := func(err error) error {
		_ = os.WriteFile(*termination, []byte(err.Error()), 0o600)
		return err
	}
	if *backup == "" {
		return fail(errors.New("--backup-path is required"))
	}
	if *caFile != "" {
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			return fail(err)
		}
		s.CA = ca
	}
	store, err := objectstore.New(s, objectstore.Credentials{AccessKeyID: getenv(EnvAccessKeyID),
		SecretAccessKey: getenv(EnvSecretAccessKey), SessionToken: getenv(EnvSessionToken)})
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	out, err := Restore(ctx, store, *backup, *dataDir)
	if err != nil {
		return fail(err)
	}
	if out.AlreadyRestored {
		_, _ = fmt.Fprintln(stderr, "the data directory was restored before; leaving it as Memgraph left it")
		return nil
	}
	_, _ = fmt.Fprintf(stderr, "restored %s and %d WAL files (%d bytes, up to commit %d, epoch %q) from %s in %.1fs\n", out.Manifest.Snapshot,
		len(out.Manifest.Files)-1, out.Manifest.Size, out.Manifest.Timestamp, out.Manifest.Epoch, *backup, time.Since(start).Seconds())
	return nil
}

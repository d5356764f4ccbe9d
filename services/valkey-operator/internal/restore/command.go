package restore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/opsuite/suite/shared/objectstore"
)

// Command is the operator binary's subcommand its init container runs.
const Command = "restore-rdb"

// Environment of the init container, each from the restore Secret (optional keys).
const (
	EnvSource          = "RESTORE_SOURCE"
	EnvCA              = "RESTORE_CA"
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// Run is the init container: with RESTORE_SOURCE set (the restore Secret has an entry for
// the node's shard) it loads that RDB into --data-dir as the server config (--config)
// expects it; without, it does nothing. It never prints a key.
func Run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("data-dir", "/data", "the server's data directory")
	config := fs.String("config", "", "the server's valkey.conf, for dbfilename and appendonly")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw := getenv(EnvSource)
	if raw == "" {
		_, _ = fmt.Fprintln(out, "restore-rdb: nothing to restore for this node")
		return nil
	}
	src, err := DecodeSource([]byte(raw))
	if err != nil {
		return err
	}
	t := Target{Dir: *dir, DBFilename: "dump.rdb", AppendDirName: "appendonlydir", AppendFilename: "appendonly.aof"}
	if *config != "" {
		if t, err = TargetFromConfig(*dir, *config); err != nil {
			return fmt.Errorf("reading %s: %w", *config, err)
		}
	}
	store, err := objectstore.New(src.Settings([]byte(getenv(EnvCA))), objectstore.Credentials{
		AccessKeyID: getenv(EnvAccessKeyID), SecretAccessKey: getenv(EnvSecretAccessKey), SessionToken: getenv(EnvSessionToken)})
	if err != nil {
		return err
	}
	outcome, err := Load(ctx, store, src, t)
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("%s/%s does not match the backup's manifest (%s): the backup is corrupt, nothing was loaded", src.Bucket, src.Object, ce.Why)
	case err != nil:
		return err
	}
	_, _ = fmt.Fprintf(out, "restore-rdb: %s/%s (%d bytes, sha256 %s) %s into %s\n", src.Bucket, src.Object, src.Size, src.SHA256, outcome, t.Dir)
	return nil
}

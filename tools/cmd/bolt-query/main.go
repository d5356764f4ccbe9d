// Command bolt-query runs Cypher queries over Bolt and prints their results, for looking at
// the local cluster's Memgraph pods from the host (which reaches every pod's address) where a
// real cluster would use mgconsole inside the pod: its flags are mgconsole's (--host, --port,
// --username, --password, --use-ssl). Queries come from standard input, separated by ';'.
// It is a tool of this repository, not shipped.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bolt-query:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("bolt-query", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "Bolt server address")
	port := fs.Int("port", 7687, "Bolt server port")
	user := fs.String("username", "", "user to log in as (none: no authentication)")
	password := fs.String("password", "", "password of --username")
	useSSL := fs.Bool("use-ssl", false, "connect over TLS")
	caFile := fs.String("ca-file", "", "with --use-ssl: PEM file of the CA that signed the server's certificate (default: the system's)")
	serverName := fs.String("server-name", "", "with --use-ssl: the name the server's certificate must hold (default: --host)")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit of each call")
	route := fs.Bool("route", false, "print the routing table a coordinator answers ROUTE with (what a neo4j:// driver asks for: one line per role and address) instead of running queries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: queries are read from standard input", fs.Args())
	}
	o := boltclient.Options{Username: *user, Password: *password, Timeout: *timeout}
	if *useSSL {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: *serverName}
		if *caFile != "" {
			pem, err := os.ReadFile(*caFile)
			if err != nil {
				return err
			}
			o.TLS.RootCAs = x509.NewCertPool()
			if !o.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("%s holds no PEM certificate", *caFile)
			}
		}
	}
	if *route {
		return printRoute(ctx, net.JoinHostPort(*host, strconv.Itoa(*port)), o, out)
	}
	text, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	queries := split(string(text))
	if len(queries) == 0 {
		return errors.New("no query on standard input")
	}
	c, err := boltclient.Dial(ctx, net.JoinHostPort(*host, strconv.Itoa(*port)), o)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	for _, q := range queries {
		res, err := c.Run(ctx, q, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		printResult(out, res)
	}
	return nil
}

// printRoute asks addr for a routing table and prints "ROLE address" lines (WRITE, READ,
// ROUTE), the addresses a neo4j:// client is sent to.
func printRoute(ctx context.Context, addr string, o boltclient.Options, out io.Writer) error {
	c, err := boltclient.Dial(ctx, addr, o)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	rt, err := c.Route(ctx)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		role  string
		addrs []string
	}{{"WRITE", rt.Writers}, {"READ", rt.Readers}, {"ROUTE", rt.Routers}} {
		for _, a := range r.addrs {
			fmt.Fprintln(out, r.role, a)
		}
	}
	return nil
}

// split cuts the input into queries at every ';' outside quotes and drops empty ones.
func split(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == ';':
			if q := strings.TrimSpace(cur.String()); q != "" {
				out = append(out, q)
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if q := strings.TrimSpace(cur.String()); q != "" {
		out = append(out, q)
	}
	return out
}

// printResult writes a result as a table: a header of the field names, then one row per record.
func printResult(out io.Writer, res *boltclient.Result) {
	if len(res.Fields) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(res.Fields, "\t"))
	for _, rec := range res.Records {
		cells := make([]string, len(rec))
		for i, v := range rec {
			cells[i] = fmt.Sprint(v)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
}

package memgraphsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// logLevel maps Memgraph's --log-level names onto slog levels.
func logLevel(name string) slog.Level {
	switch strings.ToUpper(name) {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "INFO":
		return slog.LevelInfo
	case "ERROR", "CRITICAL":
		return slog.LevelError
	}
	return slog.LevelWarn
}

// NewLogger logs to stderr at --log-level: a process here has no log directory of its own,
// and the local cluster keeps each pod's stderr.
func NewLogger(opts Options) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(opts.LogLevel)}))
}

// Server is one running simulator process: a coordinator or a data instance.
type Server struct {
	opts  Options
	log   *slog.Logger
	ilog  *invariantLog
	bolt  net.Listener
	mets  *metricsServer
	coord *coordinator
	data  *dataInstance
	done  chan error
}

// Start opens the data directory and every listener, then serves Bolt in the background
// until ctx ends or Close is called.
func Start(ctx context.Context, opts Options, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(opts.DataDirectory, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	ilog, err := openInvariantLog(opts.InvariantLog)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: log, ilog: ilog, done: make(chan error, 1)}
	var newConn func(net.Addr) bolt.Conn
	if opts.IsCoordinator() {
		if s.coord, err = newCoordinator(opts, ilog, log); err != nil {
			ilog.Close()
			return nil, err
		}
		newConn = func(net.Addr) bolt.Conn { return &coordConn{c: s.coord} }
	} else {
		if s.data, err = newDataInstance(opts, ilog, log); err == nil {
			err = s.data.start()
		}
		if err != nil {
			ilog.Close()
			return nil, err
		}
		newConn = func(net.Addr) bolt.Conn { return &dataConn{d: s.data} }
	}
	var certs *bolt.CertFiles
	if opts.BoltTLS() {
		// Memgraph reads the pair at start and does not start without it.
		if certs, err = bolt.LoadCertFiles(opts.BoltCertFile, opts.BoltKeyFile); err != nil {
			s.closeEngine()
			return nil, err
		}
	}
	newConn = withTLSReload(newConn, certs)
	if s.bolt, err = net.Listen("tcp", opts.Addr(opts.BoltPort)); err != nil {
		s.closeEngine()
		return nil, fmt.Errorf("bolt server: %w", err)
	}
	ln := s.bolt
	if certs != nil {
		ln = bolt.TLSListener(ln, certs)
		log.Info("Using secure Bolt connection (with SSL)")
	} else {
		log.Warn("Using non-secure Bolt connection (without SSL)")
	}
	if opts.MetricsPort > 0 {
		if s.mets, err = startMetrics(s, opts.Addr(opts.MetricsPort), certs); err != nil {
			s.bolt.Close()
			s.closeEngine()
			return nil, err
		}
	}
	go func() { s.done <- bolt.Serve(ctx, ln, newConn) }()
	log.Info("Memgraph simulator started", "bolt", s.bolt.Addr().String(), "coordinator", opts.IsCoordinator(), "tls", certs != nil)
	return s, nil
}

// BoltAddr is the address the Bolt listener bound.
func (s *Server) BoltAddr() string { return s.bolt.Addr().String() }

// Done reports the Bolt server's end.
func (s *Server) Done() <-chan error { return s.done }

// Close stops serving and releases the data directory.
func (s *Server) Close() error {
	s.mets.close()
	err := s.bolt.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	s.closeEngine()
	return err
}

func (s *Server) closeEngine() {
	if s.coord != nil {
		s.coord.close()
	}
	if s.data != nil {
		s.data.close()
	}
	s.ilog.Close()
}

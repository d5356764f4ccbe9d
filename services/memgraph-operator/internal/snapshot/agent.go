// Package snapshot moves Memgraph's durability files between a data instance's volume and
// the object store, for backups and restores. The operator cannot read a pod's files, so
// the data-instance pods of a cluster with spec.backup run the operator's own binary as a
// sidecar, the backup agent (Agent): it serves the snapshot and WAL files Memgraph wrote,
// read-only, to callers holding the cluster's agent token, and the operator streams them
// on into the store (the S3 credentials stay in the operator). A restore runs the same
// binary as an init container (Restore): it downloads a backup's files into the empty
// data directory, checking each against the manifest, before Memgraph starts and
// recovers from them.
package snapshot

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The data directory's folders of durability files, as Memgraph names them.
const (
	SnapshotsDir = "snapshots"
	WALDir       = "wal"
)

// File is one durability file; Name is relative to the data directory
// ("snapshots/20261205023000123456_timestamp_42").
type File struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Agent serves the durability files of one data directory.
type Agent struct {
	// DataDir is Memgraph's --data-directory as mounted in the sidecar (read-only).
	DataDir string
	// TokenFile holds the bearer token callers must present; it is read on every request,
	// so a rotated Secret takes effect without a restart.
	TokenFile string
}

// Handler is the agent's HTTP API: GET /healthz, GET /v1/files (the list), GET
// /v1/files/<name> (one file's bytes; ?length=N its first N bytes, for a WAL file still
// being written), GET /v1/info/<name> (what the file says about itself, Info).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/files", a.authorized(a.list))
	mux.HandleFunc("GET /v1/files/{dir}/{name}", a.authorized(a.file))
	mux.HandleFunc("GET /v1/info/{dir}/{name}", a.authorized(a.info))
	return mux
}

func (a *Agent) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want, err := os.ReadFile(a.TokenFile)
		token := strings.TrimSpace(string(want))
		if err != nil || token == "" {
			http.Error(w, "the agent has no token", http.StatusServiceUnavailable)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (a *Agent) list(w http.ResponseWriter, _ *http.Request) {
	files, err := ListFiles(a.DataDir)
	if err != nil {
		http.Error(w, "listing the data directory failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(files)
}

func (a *Agent) file(w http.ResponseWriter, r *http.Request) {
	name, err := fileName(r.PathValue("dir"), r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(filepath.Join(a.DataDir, filepath.FromSlash(name)))
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "opening the file failed", http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, "not a regular file", http.StatusBadRequest)
		return
	}
	// The size is fixed when the answer starts: a file that grows meanwhile (the WAL
	// file being written) is served as it was, never with a length it does not announce.
	n := st.Size()
	if l := r.URL.Query().Get("length"); l != "" {
		want, err := strconv.ParseInt(l, 10, 64)
		if err != nil || want < 0 {
			http.Error(w, "length must be a byte count", http.StatusBadRequest)
			return
		}
		if want > n {
			http.Error(w, "the file is shorter than the length asked for", http.StatusConflict)
			return
		}
		n = want
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	_, _ = io.CopyN(w, f, n)
}

func (a *Agent) info(w http.ResponseWriter, r *http.Request) {
	name, err := fileName(r.PathValue("dir"), r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	info, err := InspectFile(filepath.Join(a.DataDir, filepath.FromSlash(name)), name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, "no such file", http.StatusNotFound)
		return
	case err != nil:
		// A file that does not read whole (a corrupted snapshot) is not one to back up.
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// fileName checks a requested file: a plain name in snapshots/ or wal/, nothing else of
// the data directory (users, settings) and no way out of it.
func fileName(dir, name string) (string, error) {
	if dir != SnapshotsDir && dir != WALDir {
		return "", fmt.Errorf("only %s/ and %s/ are served", SnapshotsDir, WALDir)
	}
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) {
		return "", errors.New("a file name without a path is required")
	}
	return path.Join(dir, name), nil
}

// ListFiles lists the regular files of dataDir's snapshots/ and wal/, skipping hidden
// ones (Memgraph's temporary files and old-directory backups start with a dot).
func ListFiles(dataDir string) ([]File, error) {
	var out []File
	for _, d := range []string{SnapshotsDir, WALDir} {
		ents, err := os.ReadDir(filepath.Join(dataDir, d))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			out = append(out, File{Name: path.Join(d, e.Name()), Size: info.Size()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Client calls one pod's agent.
type Client struct {
	// BaseURL is http://<pod address>:<agent port>.
	BaseURL string
	// Token is the cluster's agent token.
	Token string
	// HTTP is the client (default: one with a 10 s response-header timeout).
	HTTP *http.Client
}

func (c Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 10 * time.Second}}
}

func (c Client) get(ctx context.Context, p string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+p, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("backup agent: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, &AgentError{Path: p, Status: resp.StatusCode, Text: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// AgentError is an answer of the agent other than 200.
type AgentError struct {
	Path   string
	Status int
	Text   string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("backup agent: GET %s: %d %s: %s", e.Path, e.Status, http.StatusText(e.Status), e.Text)
}

// IsAgentStatus reports whether err is the agent's answer with HTTP status code.
func IsAgentStatus(err error, code int) bool {
	var e *AgentError
	return errors.As(err, &e) && e.Status == code
}

// List returns the durability files the agent sees.
func (c Client) List(ctx context.Context) ([]File, error) {
	resp, err := c.get(ctx, "/v1/files")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var files []File
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&files); err != nil {
		return nil, fmt.Errorf("backup agent: reading the file list: %w", err)
	}
	return files, nil
}

// Open streams one file; the caller closes it. Size is the length the agent announced.
func (c Client) Open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	return c.open(ctx, name, "")
}

// OpenLength streams the first length bytes of one file (a WAL file up to its last whole
// transaction); the caller closes it.
func (c Client) OpenLength(ctx context.Context, name string, length int64) (io.ReadCloser, int64, error) {
	return c.open(ctx, name, "?length="+strconv.FormatInt(length, 10))
}

func (c Client) open(ctx context.Context, name, query string) (io.ReadCloser, int64, error) {
	if err := checkName(name); err != nil {
		return nil, 0, err
	}
	resp, err := c.get(ctx, "/v1/files/"+name+query)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// Info asks what one file says about itself.
func (c Client) Info(ctx context.Context, name string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	resp, err := c.get(ctx, "/v1/info/"+name)
	if err != nil {
		return Info{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var info Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return Info{}, fmt.Errorf("backup agent: reading the information of %s: %w", name, err)
	}
	return info, nil
}

func checkName(name string) error {
	dir, base, ok := strings.Cut(name, "/")
	if _, err := fileName(dir, base); !ok || err != nil {
		return fmt.Errorf("backup agent: %q is not a file of %s/ or %s/", name, SnapshotsDir, WALDir)
	}
	return nil
}

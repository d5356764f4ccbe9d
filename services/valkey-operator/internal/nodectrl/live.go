package nodectrl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// hash names a rendering in status (appliedConfigHash, appliedACLHash).
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// parseLive reads live.conf: one `key value` per line (the value may hold spaces), blank
// lines and # comments skipped.
func parseLive(s string) ([][2]string, error) {
	var out [][2]string
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("live.conf line %d %q has no value", i+1, line)
		}
		out = append(out, [2]string{k, strings.TrimSpace(v)})
	}
	return out, nil
}

// aclUser is one `user <name> <rules...>` line of users.acl.
type aclUser struct {
	name  string
	rules []string
}

// parseACL reads users.acl as the server's aclfile would: one user per line.
func parseACL(s string) ([]aclUser, error) {
	var out []aclUser
	seen := map[string]bool{}
	for i, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] != "user" || len(f) < 2 {
			return nil, fmt.Errorf("users.acl line %d is not `user <name> <rules>`", i+1)
		}
		if seen[f[1]] {
			return nil, fmt.Errorf("users.acl line %d repeats user %s", i+1, f[1])
		}
		seen[f[1]] = true
		out = append(out, aclUser{name: f[1], rules: f[2:]})
	}
	return out, nil
}

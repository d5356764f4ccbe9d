// Package rbacaudit compares what RBAC grants a ServiceAccount with what it did, as the API
// server's audit log (JSON lines of audit.k8s.io/v1 Events, Metadata level: the local
// cluster's policy, tools/internal/localcluster) records it: the accesses granted and never
// used, and the requests refused (403). tools/e2e runs it over the operators after the suite.
package rbacaudit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Access is one verb on one resource of one API group ("" for core); Resource holds the
// subresource after a slash, as RBAC names it (pods/status).
type Access struct {
	Verb, Group, Resource string
}

func (a Access) String() string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	return a.Verb + " " + r
}

// Event is the part of an audit.k8s.io/v1 Event this package reads.
type Event struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// Audit annotations: the authorizer's decision, and the failure of a
// ValidatingAdmissionPolicy.
const (
	decisionAnnotation       = "authorization.k8s.io/decision"
	policyFailureAnnotation  = "validation.policy.admission.k8s.io/validation_failure"
	decisionForbid           = "forbid"
	refusedByRBAC            = "RBAC"
	refusedByAdmissionPolicy = "ValidatingAdmissionPolicy"
)

// Refusal is a request the API server refused for lack of a right: RBAC's decision was
// forbid, or a ValidatingAdmissionPolicy failed it. A 403 of other admission (a namespace
// being deleted, a CRD terminating) is no refusal of a right: RBAC let it through, so it
// counts as a use.
type Refusal struct {
	Access
	Namespace, RequestURI, By, Message string
}

// Access is the event's request as RBAC sees it; ok is false for non-resource requests.
func (e Event) Access() (Access, bool) {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		return Access{}, false
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return Access{Verb: e.Verb, Group: e.ObjectRef.APIGroup, Resource: r}, true
}

// Read parses an audit log; a line that is not an Event is an error (a truncated last line
// included: the API server writes whole lines).
func Read(r io.Reader) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

// ReadFile reads an audit log file.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Use is what one user did: each access with its count of requests RBAC let through, and the
// refusals.
type Use struct {
	Used    map[Access]int
	Refused []Refusal
}

// UseOf collects the requests of username (system:serviceaccount:<ns>:<name>). A request
// counts once, at its last stage (ResponseComplete, or ResponseStarted for a watch still
// open when the log was read); any answer but 401 and 403 (a 404 too) means RBAC let it
// through, so the access was used.
func UseOf(events []Event, username string) Use {
	u := Use{Used: map[Access]int{}}
	for _, e := range events {
		if e.User.Username != username || e.ResponseStatus == nil {
			continue
		}
		a, ok := e.Access()
		if !ok {
			continue
		}
		refusal := Refusal{Access: a, Namespace: e.ObjectRef.Namespace, RequestURI: e.RequestURI, Message: e.ResponseStatus.Message}
		switch {
		case e.ResponseStatus.Code == 403 && e.Annotations[decisionAnnotation] == decisionForbid:
			if e.Stage == "ResponseComplete" {
				refusal.By = refusedByRBAC
				u.Refused = append(u.Refused, refusal)
			}
		case e.ResponseStatus.Code == 403 && e.Annotations[policyFailureAnnotation] != "":
			if e.Stage == "ResponseComplete" {
				refusal.By = refusedByAdmissionPolicy
				u.Refused = append(u.Refused, refusal)
			}
		case e.ResponseStatus.Code == 401:
			// Not authenticated: not this user's access at all.
		case e.Stage == "ResponseComplete" || (e.Stage == "ResponseStarted" && e.Verb == "watch"):
			// Authorized: a 404 or a 409 still used the access.
			u.Used[a]++
			// A watch-list (client-go's informers: sendInitialEvents=true) streams the
			// initial list instead of a list request; the API server checks list for it too,
			// and the reflector falls back to a list where the server cannot stream.
			if e.Verb == "watch" && strings.Contains(e.RequestURI, "sendInitialEvents=true") {
				u.Used[Access{Verb: "list", Group: a.Group, Resource: a.Resource}]++
			}
			// A patch that answers 201 created the object (server-side apply of a new
			// object), which the API server authorizes as create too.
			if e.Verb == "patch" && e.ResponseStatus.Code == 201 {
				u.Used[Access{Verb: "create", Group: a.Group, Resource: a.Resource}]++
			}
		}
	}
	return u
}

// Granted expands RBAC rules into accesses. Wildcards cannot be expanded and are returned
// apart; non-resource rules are left out. resourceNames narrow a rule to some objects but it
// is still the access it grants.
func Granted(rules []rbacv1.PolicyRule) (granted []Access, wildcards []rbacv1.PolicyRule) {
	seen := map[Access]bool{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			continue
		}
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Resources, "*") {
			wildcards = append(wildcards, r)
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					a := Access{Verb: v, Group: g, Resource: res}
					if !seen[a] {
						seen[a] = true
						granted = append(granted, a)
					}
				}
			}
		}
	}
	slices.SortFunc(granted, compare)
	return granted, wildcards
}

// Unused lists the granted accesses the user never used.
func Unused(granted []Access, u Use) []Access {
	var out []Access
	for _, a := range granted {
		if u.Used[a] == 0 {
			out = append(out, a)
		}
	}
	return out
}

// Compare checks the grants against the use: unexplained are the accesses granted, never
// used and not excused (excused maps an access to why it is needed on a path the use did
// not take); stale are the excused accesses no rule grants, an excuse left over from a
// pruned grant. An excused access that was used is neither: the path ran this time.
func Compare(granted []Access, u Use, excused map[Access]string) (unexplained, stale []Access) {
	for _, a := range Unused(granted, u) {
		if _, ok := excused[a]; !ok {
			unexplained = append(unexplained, a)
		}
	}
	for a := range excused {
		if !slices.Contains(granted, a) {
			stale = append(stale, a)
		}
	}
	slices.SortFunc(stale, compare)
	return unexplained, stale
}

func compare(a, b Access) int {
	return strings.Compare(a.Group+"/"+a.Resource+"/"+a.Verb, b.Group+"/"+b.Resource+"/"+b.Verb)
}

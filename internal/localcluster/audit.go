package localcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// podRemovalAuditPolicy records, once answered, each request that deletes a
// pod or creates an eviction, and nothing else.
const podRemovalAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources:
  - group: ""
    resources: ["pods"]
- level: Metadata
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: None
`

func (c *Cluster) auditLogPath() string { return filepath.Join(c.Dir, "logs", "audit.log") }

// PodRemoval is one request, answered, to delete a pod or to evict it.
type PodRemoval struct {
	At        time.Time
	UserAgent string
	// Eviction is true for a create of pods/eviction, false for a delete.
	Eviction  bool
	Namespace string
	Pod       string // empty for a deletecollection
	Code      int32  // the HTTP status of the answer
}

// auditEvent is the part of an audit.k8s.io/v1 Event that PodRemovals reads.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int32 `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// PodRemovals reads the API server's audit log (Options.AuditPodRemovals)
// and returns the pod deletes and evictions answered since since, in the
// log's order.
func (c *Cluster) PodRemovals(since time.Time) ([]PodRemoval, error) {
	if !c.opts.AuditPodRemovals {
		return nil, errors.New("the cluster keeps no audit log: start it with AuditPodRemovals")
	}
	f, err := os.Open(c.auditLogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var removals []PodRemoval
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		var e auditEvent
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading %s: %w", c.auditLogPath(), err)
		}
		if e.ObjectRef == nil || e.ObjectRef.Resource != "pods" || e.StageTimestamp.Before(since) {
			continue
		}
		r := PodRemoval{At: e.StageTimestamp, UserAgent: e.UserAgent, Namespace: e.ObjectRef.Namespace, Pod: e.ObjectRef.Name}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		switch {
		case e.Verb == "create" && e.ObjectRef.Subresource == "eviction":
			r.Eviction = true
		case (e.Verb == "delete" || e.Verb == "deletecollection") && e.ObjectRef.Subresource == "":
		default:
			continue
		}
		removals = append(removals, r)
	}
	return removals, lines.Err()
}

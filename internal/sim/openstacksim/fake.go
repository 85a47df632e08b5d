// Package openstacksim is a local endpoint that speaks the wire format
// of the OpenStack APIs pitstop's Kubernikus integration calls: Keystone
// v3 password tokens with a service catalog, Nova's server list and
// show and delete, and the Kubernikus API's cluster. Tests drive it through the
// real client library (gophercloud), as the real services would be.
package openstacksim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Account is the one user the fake lets in.
type Account struct {
	User, Password, Domain, Project, Region string
}

// NodePool is a Kubernikus node pool.
type NodePool struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// Server answers Keystone at URL+"/identity/v3", Nova at
// URL+"/compute/v2.1" and Kubernikus at URL+"/kubernikus/".
type Server struct {
	URL     string
	account Account

	mu       sync.Mutex
	tokens   map[string]bool
	logins   int
	servers  map[string]string // id → name
	metadata map[string]map[string]string
	deleted  []string
	clusters map[string][]NodePool
	// catalogKubernikus puts Kubernikus in the catalog.
	catalogKubernikus bool
}

// New starts a fake for account, stopped at the end of the test.
func New(t testing.TB, account Account) *Server {
	s := &Server{account: account, tokens: map[string]bool{}, servers: map[string]string{}, metadata: map[string]map[string]string{}, clusters: map[string][]NodePool{}, catalogKubernikus: true}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /identity/v3/auth/tokens", s.token)
	mux.HandleFunc("GET /compute/v2.1/servers/detail", s.authed(s.listServers))
	mux.HandleFunc("GET /compute/v2.1/servers/{id}", s.authed(s.showServer))
	mux.HandleFunc("DELETE /compute/v2.1/servers/{id}", s.authed(s.deleteServer))
	mux.HandleFunc("GET /kubernikus/api/v1/clusters/{name}", s.authed(s.cluster))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// AuthURL is Keystone's v3 endpoint.
func (s *Server) AuthURL() string { return s.URL + "/identity/v3" }

// AddServer adds a Nova server and returns its ID.
func (s *Server) AddServer(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newID()
	s.servers[id] = name
	return id
}

// SetMetadata sets the metadata of the server with ID id, as Kubernikus
// sets kubernikus:kluster and kubernikus:nodepool on its nodes' servers.
func (s *Server) SetMetadata(id string, metadata map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metadata[id] = metadata
}

// Servers are the names of the servers, sorted.
func (s *Server) Servers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Deleted are the IDs of the servers deleted, in order.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deleted...)
}

// SetCluster sets a Kubernikus cluster's node pools.
func (s *Server) SetCluster(name string, pools ...NodePool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[name] = pools
}

// ExpireTokens makes every token issued so far invalid, as on expiry.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
}

// Logins is how many tokens were issued.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fault(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": message}})
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// token is Keystone's POST /v3/auth/tokens with a password and a project
// scope.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Auth struct {
			Identity struct {
				Methods  []string `json:"methods"`
				Password struct {
					User struct {
						Name     string `json:"name"`
						Password string `json:"password"`
						Domain   struct {
							Name string `json:"name"`
						} `json:"domain"`
					} `json:"user"`
				} `json:"password"`
			} `json:"identity"`
			Scope struct {
				Project struct {
					ID string `json:"id"`
				} `json:"project"`
			} `json:"scope"`
		} `json:"auth"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fault(w, http.StatusBadRequest, "malformed request body")
		return
	}
	u := req.Auth.Identity.Password.User
	a := s.account
	if u.Name != a.User || u.Password != a.Password || u.Domain.Name != a.Domain {
		fault(w, http.StatusUnauthorized, "The request you have made requires authentication.")
		return
	}
	if req.Auth.Scope.Project.ID != a.Project {
		fault(w, http.StatusUnauthorized, "not authorized for project "+req.Auth.Scope.Project.ID)
		return
	}
	token := newID()
	s.mu.Lock()
	s.tokens[token] = true
	s.logins++
	withKubernikus := s.catalogKubernikus
	s.mu.Unlock()
	endpoint := func(url string) []map[string]any {
		return []map[string]any{{"id": newID(), "interface": "public", "region": a.Region, "region_id": a.Region, "url": url}}
	}
	catalog := []map[string]any{{"type": "compute", "name": "nova", "id": newID(), "endpoints": endpoint(s.URL + "/compute/v2.1")}}
	if withKubernikus {
		catalog = append(catalog, map[string]any{"type": "kubernikus", "name": "kubernikus", "id": newID(), "endpoints": endpoint(s.URL + "/kubernikus/")})
	}
	w.Header().Set("X-Subject-Token", token)
	reply(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    []string{"password"},
		"expires_at": time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z"),
		"issued_at":  time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": newID(), "name": a.User, "domain": map[string]any{"id": a.Domain, "name": a.Domain}},
		"project":    map[string]any{"id": a.Project, "name": a.Project, "domain": map[string]any{"id": a.Domain, "name": a.Domain}},
		"catalog":    catalog,
	}})
}

// authed lets a request through with a valid X-Auth-Token only.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ok := s.tokens[r.Header.Get("X-Auth-Token")]
		s.mu.Unlock()
		if !ok {
			fault(w, http.StatusUnauthorized, "The request you have made requires authentication.")
			return
		}
		h(w, r)
	}
}

// listServers is Nova's GET /servers/detail; name is a regular expression.
func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	var match *regexp.Regexp
	if n := r.URL.Query().Get("name"); n != "" {
		var err error
		if match, err = regexp.Compile(n); err != nil {
			fault(w, http.StatusBadRequest, "Invalid regular expression")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := []map[string]any{}
	for id, name := range s.servers {
		if match != nil && !match.MatchString(name) {
			continue
		}
		list = append(list, s.server(id, name))
	}
	sort.Slice(list, func(i, j int) bool { return list[i]["name"].(string) < list[j]["name"].(string) })
	reply(w, http.StatusOK, map[string]any{"servers": list})
}

// server is a server as Nova shows it; the caller holds s.mu.
func (s *Server) server(id, name string) map[string]any {
	metadata := s.metadata[id]
	if metadata == nil {
		metadata = map[string]string{}
	}
	return map[string]any{
		"id": id, "name": name, "status": "ACTIVE", "tenant_id": s.account.Project, "metadata": metadata,
		"created": "2026-11-01T00:00:00Z", "updated": "2026-11-01T00:00:00Z",
		"links": []map[string]any{{"rel": "self", "href": s.URL + "/compute/v2.1/servers/" + id}},
	}
}

// showServer is Nova's GET /servers/{id}.
func (s *Server) showServer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	name, ok := s.servers[id]
	if !ok {
		fault(w, http.StatusNotFound, "Instance "+id+" could not be found.")
		return
	}
	reply(w, http.StatusOK, map[string]any{"server": s.server(id, name)})
}

// deleteServer is Nova's DELETE /servers/{id}.
func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.servers[id]; !ok {
		fault(w, http.StatusNotFound, "Instance "+id+" could not be found.")
		return
	}
	delete(s.servers, id)
	s.deleted = append(s.deleted, id)
	w.WriteHeader(http.StatusNoContent)
}

// cluster is the Kubernikus API's GET /api/v1/clusters/{name}.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	pools, ok := s.clusters[name]
	s.mu.Unlock()
	if !ok {
		reply(w, http.StatusNotFound, map[string]any{"code": 404, "message": "cluster " + strings.TrimSpace(name) + " not found"})
		return
	}
	reply(w, http.StatusOK, map[string]any{"name": name, "spec": map[string]any{"name": name, "nodePools": pools}, "status": map[string]any{"phase": "Running"}})
}

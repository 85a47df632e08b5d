package ec2sim

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Instance states, as EC2 names them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

// Instance is an EC2 instance the fake keeps.
type Instance struct {
	ID, ImageID, InstanceType, State string
	Zone, SubnetID, VPCID            string
	PrivateIP, PrivateDNS            string
	PublicIP, PublicDNS              string
	// SecondaryPrivateIPs are further private addresses of the primary
	// network interface.
	SecondaryPrivateIPs []string
	SecurityGroupIDs    []string
	KeyName             string
	ClientToken         string
	// UserData is as RunInstances received it: base64.
	UserData string
	// IAMInstanceProfile is the profile's name or ARN, as requested.
	IAMInstanceProfile string
	Tags               map[string]string
	LaunchTime         time.Time
	// Events are the events EC2 has scheduled for the instance
	// (ScheduleEvent).
	Events []ScheduledEvent
}

// Subnet is a subnet the fake knows.
type Subnet struct {
	ID, VPCID, Zone, CIDR string
	Tags                  map[string]string
}

// SecurityGroup is a security group the fake knows.
type SecurityGroup struct {
	ID, Name, VPCID string
	Tags            map[string]string
}

// Image is an AMI the fake knows; RunInstances refuses any other.
type Image struct {
	ID, Name, RootDeviceName string
}

// Fault is an error EC2 answers with: its code, message and HTTP status.
type Fault struct {
	Code, Message string
	Status        int
}

// Throttled is what EC2 answers when it sheds load: RequestLimitExceeded
// with HTTP 503.
var Throttled = Fault{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Status: http.StatusServiceUnavailable}

// Request is a request the fake received, signed by AccessKeyID for
// Region.
type Request struct {
	Action      string
	Params      url.Values
	Header      http.Header
	AccessKeyID string
	Region      string
}

// Server is an in-memory EC2 behind an httptest server.
type Server struct {
	// URL is the endpoint to point the SDK at.
	URL string

	mu          sync.Mutex
	srv         *httptest.Server
	credentials map[string]string
	instances   []*Instance
	subnets     []Subnet
	groups      []SecurityGroup
	images      []Image
	requests    []Request
	faults      map[string][]*pendingFault
	pageSize    int
	seq         int
	reboots     map[string]int
	onReboot    func(id string)
	onLaunch    func(Instance)
	onTerminate func(Instance)
}

type pendingFault struct {
	fault Fault
	times int // < 0: forever
}

// New starts a fake EC2 that stops when the test ends. It pages results
// 1000 at a time, as EC2 does at most; SetPageSize makes pages smaller.
func New(t testing.TB) *Server {
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake EC2 outside a test (a demo): Close stops it. Its
// pages are a thousand items long, as EC2's are at most.
func Start() *Server {
	s := &Server{credentials: map[string]string{}, faults: map[string][]*pendingFault{}, pageSize: 1000, reboots: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL
	return s
}

// Close stops a fake Start started.
func (s *Server) Close() { s.srv.Close() }

// OnLaunch makes RunInstances call f with each instance it launches, and
// OnTerminate TerminateInstances with each it terminates: a demo makes and
// removes the instances' nodes there. f runs on a goroutine of its own.
func (s *Server) OnLaunch(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLaunch = f
}

// OnTerminate: see OnLaunch.
func (s *Server) OnTerminate(f func(Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onTerminate = f
}

// AddCredentials makes the fake accept requests signed with this key.
// Requests signed with any other are refused with AuthFailure.
func (s *Server) AddCredentials(accessKeyID, secretAccessKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.credentials[accessKeyID] = secretAccessKey
}

// SetPageSize sets how many items (reservations, subnets, security
// groups) a page holds before filters apply.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// AddSubnet adds a subnet.
func (s *Server) AddSubnet(sn Subnet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnets = append(s.subnets, sn)
}

// AddSecurityGroup adds a security group.
func (s *Server) AddSecurityGroup(g SecurityGroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, g)
}

// AddImage adds an AMI.
func (s *Server) AddImage(img Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = append(s.images, img)
}

// AddInstance adds an instance as if it had been launched, and returns its
// ID (generated when i.ID is empty). Its state defaults to running.
func (s *Server) AddInstance(i Instance) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if i.ID == "" {
		i.ID = fmt.Sprintf("i-%017x", s.seq)
	}
	if i.State == "" {
		i.State = StateRunning
	}
	if i.LaunchTime.IsZero() {
		i.LaunchTime = fakeEpoch.Add(time.Duration(s.seq) * time.Second)
	}
	i.Tags = cloneMap(i.Tags)
	s.instances = append(s.instances, &i)
	return i.ID
}

// SetState moves an instance to a state (running once it has booted,
// terminated when it is gone).
func (s *Server) SetState(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instance(id); i != nil {
		i.State = state
	}
}

// Instance returns a copy of the instance with that ID.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instance(id); i != nil {
		return clone(i), true
	}
	return Instance{}, false
}

// Instances returns copies of all instances, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, i := range s.instances {
		out = append(out, clone(i))
	}
	return out
}

// Fail makes the next `times` requests for action fail with f (all of
// them when times < 0). Faults queue: the next one starts when the one
// before has been used up.
func (s *Server) Fail(action string, times int, f Fault) {
	if times == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[action] = append(s.faults[action], &pendingFault{fault: f, times: times})
}

// ClearFaults drops the faults still queued for action.
func (s *Server) ClearFaults(action string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, action)
}

// Requests returns the requests received for action (all actions when
// action is empty), in order, including those answered with a fault.
func (s *Server) Requests(action string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if action == "" || r.Action == action {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeFault(w, Fault{Code: "InvalidRequest", Message: err.Error(), Status: http.StatusBadRequest})
		return
	}
	params, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil {
		writeFault(w, Fault{Code: "InvalidRequest", Message: "EC2's query protocol takes a form-encoded POST", Status: http.StatusBadRequest})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	req := Request{Action: params.Get("Action"), Params: params, Header: r.Header.Clone()}
	var fault *Fault
	req.AccessKeyID, req.Region, fault = verifySignature(r, body, s.credentials)
	s.requests = append(s.requests, req)
	if fault != nil {
		writeFault(w, *fault)
		return
	}
	if v := params.Get("Version"); v != apiVersion {
		writeFault(w, Fault{Code: "InvalidParameterValue", Message: fmt.Sprintf("Version %q is not supported", v), Status: http.StatusBadRequest})
		return
	}
	if f := s.takeFault(req.Action); f != nil {
		writeFault(w, *f)
		return
	}
	var resp any
	switch req.Action {
	case "RunInstances":
		resp, fault = s.runInstances(params)
	case "DescribeInstances":
		resp, fault = s.describeInstances(params)
	case "TerminateInstances":
		resp, fault = s.terminateInstances(params)
	case "DescribeSubnets":
		resp, fault = s.describeSubnets(params)
	case "DescribeSecurityGroups":
		resp, fault = s.describeSecurityGroups(params)
	case "DescribeImages":
		resp, fault = s.describeImages(params)
	case "DescribeInstanceStatus":
		resp, fault = s.describeInstanceStatus(params)
	case "RebootInstances":
		resp, fault = s.rebootInstances(params)
	default:
		fault = &Fault{Code: "InvalidAction", Message: fmt.Sprintf("The action %s is not valid for this web service.", req.Action), Status: http.StatusBadRequest}
	}
	if fault != nil {
		writeFault(w, *fault)
		return
	}
	out, err := xml.Marshal(resp)
	if err != nil {
		writeFault(w, Fault{Code: "InternalError", Message: err.Error(), Status: http.StatusInternalServerError})
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(out)
}

func (s *Server) takeFault(action string) *Fault {
	queue := s.faults[action]
	if len(queue) == 0 {
		return nil
	}
	f := queue[0]
	if f.times > 0 {
		f.times--
		if f.times == 0 {
			s.faults[action] = queue[1:]
		}
	}
	return &f.fault
}

func (s *Server) requestID() string {
	s.seq++
	return fmt.Sprintf("7a62c49f-347e-4fc4-9331-%012x", s.seq)
}

func writeFault(w http.ResponseWriter, f Fault) {
	out, _ := xml.Marshal(errorResponse{
		Errors:    []xmlError{{Code: f.Code, Message: f.Message}},
		RequestID: "b25f4e2a-0000-4000-8000-000000000000",
	})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(out)
}

func (s *Server) instance(id string) *Instance {
	for _, i := range s.instances {
		if i.ID == id {
			return i
		}
	}
	return nil
}

func (s *Server) groupsByID() map[string]SecurityGroup {
	m := map[string]SecurityGroup{}
	for _, g := range s.groups {
		m[g.ID] = g
	}
	return m
}

// list returns prefix.1, prefix.2, ... until one is missing.
func list(params url.Values, prefix string) []string {
	var out []string
	for n := 1; params.Has(prefix + "." + strconv.Itoa(n)); n++ {
		out = append(out, params.Get(prefix+"."+strconv.Itoa(n)))
	}
	return out
}

func clone(i *Instance) Instance {
	c := *i
	c.Tags = cloneMap(i.Tags)
	c.SecurityGroupIDs = slices.Clone(i.SecurityGroupIDs)
	c.SecondaryPrivateIPs = slices.Clone(i.SecondaryPrivateIPs)
	return c
}

func cloneMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

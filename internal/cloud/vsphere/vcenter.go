package vsphere

import (
	"context"
	"fmt"
	"net/url"
	"slices"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// What a hosts maintenance is (HostState.Maintenance): the values the
// ESX integration writes into its node label.
const (
	InMaintenanceTrue  = "true"
	InMaintenanceAlarm = "alarm"
	InMaintenanceFalse = "false"
)

// HostState is what the vCenter says of one ESX host.
type HostState struct {
	// Version is the host's ESX version (config.product.version).
	Version string
	// Maintenance is InMaintenanceTrue when the host is in maintenance
	// mode or entering it, InMaintenanceAlarm when one of the configured
	// alarms is triggered on it, else InMaintenanceFalse.
	Maintenance string
	// Alarm names the triggered alarm when Maintenance is alarm.
	Alarm string

	// vms are the virtual machines registered on the host.
	vms []types.ManagedObjectReference
}

// taskEnterMaintenance is the description of a host's
// EnterMaintenanceMode_Task.
const taskEnterMaintenance = "HostSystem.enterMaintenanceMode"

// Client is a logged-in session with one availability zone's vCenter.
type Client struct {
	c *vim25.Client
}

// dial logs in to the vCenter at rawURL. The credentials go only into the
// login call; errors never carry them.
func Dial(ctx context.Context, rawURL string, insecure bool, creds Credentials) (*Client, error) {
	u, err := soap.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("vCenter URL %q: %w", rawURL, err)
	}
	u.User = nil
	c, err := vim25.NewClient(ctx, soap.NewClient(u, insecure))
	if err != nil {
		return nil, fmt.Errorf("connecting to vCenter %s: %w", u.Redacted(), err)
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(creds.Username, creds.Password)); err != nil {
		return nil, fmt.Errorf("logging in to vCenter %s as %q: %w", u.Redacted(), creds.Username, err)
	}
	return &Client{c: c}, nil
}

func (v *Client) Logout(ctx context.Context) {
	_ = session.NewManager(v.c).Logout(ctx)
}

// retrieve reads the properties ps of every managed object of kind under
// the vCenter's root folder into dst.
func (v *Client) retrieve(ctx context.Context, kind string, ps []string, dst any) error {
	m := view.NewManager(v.c)
	cv, err := m.CreateContainerView(ctx, v.c.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		return err
	}
	defer func() { _ = cv.Destroy(ctx) }()
	return cv.Retrieve(ctx, []string{kind}, ps, dst)
}

// hosts reads the state of the hosts named in names, keyed by name; a
// host the vCenter does not know is left out, and so is a name two hosts
// hold (twins names those): pitstop will not guess which one is the
// nodes'. alarms are the alarm names that count.
func (v *Client) Hosts(ctx context.Context, names map[string]bool, alarms []string) (out map[string]HostState, twins []string, err error) {
	var all []mo.HostSystem
	if err := v.retrieve(ctx, "HostSystem", []string{"name", "runtime.inMaintenanceMode", "config.product.version", "triggeredAlarmState", "recentTask", "vm"}, &all); err != nil {
		return nil, nil, fmt.Errorf("reading the hosts: %w", err)
	}
	seen := map[string]int{}
	for _, h := range all {
		seen[h.Name]++
	}
	pc := property.DefaultCollector(v.c)
	out = map[string]HostState{}
	for _, h := range all {
		if !names[h.Name] {
			continue
		}
		if seen[h.Name] > 1 {
			if !slices.Contains(twins, h.Name) {
				twins = append(twins, h.Name)
			}
			continue
		}
		st := HostState{Maintenance: InMaintenanceFalse, vms: h.Vm}
		if h.Config != nil {
			st.Version = h.Config.Product.Version
		}
		switch {
		case h.Runtime.InMaintenanceMode:
			st.Maintenance = InMaintenanceTrue
		default:
			entering, err := enteringMaintenance(ctx, pc, h.RecentTask)
			if err != nil {
				return nil, nil, fmt.Errorf("reading the tasks of host %s: %w", h.Name, err)
			}
			if entering {
				st.Maintenance = InMaintenanceTrue
			}
		}
		if st.Maintenance == InMaintenanceFalse && len(alarms) > 0 {
			name, err := triggered(ctx, pc, h.TriggeredAlarmState, alarms)
			if err != nil {
				return nil, nil, fmt.Errorf("reading the alarms of host %s: %w", h.Name, err)
			}
			if name != "" {
				st.Maintenance, st.Alarm = InMaintenanceAlarm, name
			}
		}
		out[h.Name] = st
	}
	return out, twins, nil
}

// enteringMaintenance says whether one of tasks is a queued or running
// EnterMaintenanceMode_Task.
func enteringMaintenance(ctx context.Context, pc *property.Collector, tasks []types.ManagedObjectReference) (bool, error) {
	if len(tasks) == 0 {
		return false, nil
	}
	var list []mo.Task
	if err := pc.Retrieve(ctx, tasks, []string{"info"}, &list); err != nil {
		return false, err
	}
	for _, t := range list {
		if t.Info.DescriptionId == taskEnterMaintenance && (t.Info.State == types.TaskInfoStateQueued || t.Info.State == types.TaskInfoStateRunning) {
			return true, nil
		}
	}
	return false, nil
}

// triggered returns the name of the first alarm in states (not green)
// that is one of names; "" when none is.
func triggered(ctx context.Context, pc *property.Collector, states []types.AlarmState, names []string) (string, error) {
	var refs []types.ManagedObjectReference
	for _, s := range states {
		if s.OverallStatus != types.ManagedEntityStatusGreen {
			refs = append(refs, s.Alarm)
		}
	}
	if len(refs) == 0 {
		return "", nil
	}
	var list []mo.Alarm
	if err := pc.Retrieve(ctx, refs, []string{"info.name"}, &list); err != nil {
		return "", err
	}
	for _, a := range list {
		if slices.Contains(names, a.Info.Name) {
			return a.Info.Name, nil
		}
	}
	return "", nil
}

// VM is a virtual machine registered on a host.
type VM struct {
	Ref   types.ManagedObjectReference
	Name  string
	UUID  string // config.uuid, the BIOS UUID a vsphere:// providerID holds
	Power types.VirtualMachinePowerState
}

// vmsOn reads the virtual machines registered on hosts, by host name.
func (v *Client) VMsOn(ctx context.Context, hosts map[string]HostState) (map[string][]VM, error) {
	var refs []types.ManagedObjectReference
	hostOf := map[types.ManagedObjectReference]string{}
	for name, st := range hosts {
		for _, ref := range st.vms {
			refs = append(refs, ref)
			hostOf[ref] = name
		}
	}
	out := map[string][]VM{}
	if len(refs) == 0 {
		return out, nil
	}
	var all []mo.VirtualMachine
	if err := property.DefaultCollector(v.c).Retrieve(ctx, refs, []string{"name", "runtime.powerState", "config.uuid"}, &all); err != nil {
		return nil, fmt.Errorf("reading the virtual machines: %w", err)
	}
	for _, m := range all {
		found := VM{Ref: m.Self, Name: m.Name, Power: m.Runtime.PowerState}
		if m.Config != nil {
			found.UUID = m.Config.Uuid
		}
		h := hostOf[m.Self]
		out[h] = append(out[h], found)
	}
	return out, nil
}

// shutdownGuest asks the guest to shut down; it does not wait.
func (v *Client) ShutdownGuest(ctx context.Context, m VM) error {
	return object.NewVirtualMachine(v.c, m.Ref).ShutdownGuest(ctx)
}

// powerOff powers the VM off at once and waits for it.
func (v *Client) PowerOff(ctx context.Context, m VM) error {
	task, err := object.NewVirtualMachine(v.c, m.Ref).PowerOff(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// powerOn powers the VM on and waits for it.
func (v *Client) PowerOn(ctx context.Context, m VM) error {
	task, err := object.NewVirtualMachine(v.c, m.Ref).PowerOn(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// Credentials log in to one vCenter. They are never logged.
type Credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

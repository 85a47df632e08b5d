package aws_test

import (
	"context"
	"errors"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

func TestDelete(t *testing.T) {
	tests := []struct {
		name string
		// instances are in the account before Delete.
		instances []ec2sim.Instance
		edits     []func(*machinev1beta1.Machine)
		// wantTerminated are the IDs Delete must have terminated;
		// wantKept the ones it must not touch.
		wantTerminated, wantKept []string
		wantTerminateCalls       int
	}{
		{
			name:               "terminates the instance recorded in providerStatus",
			instances:          []ec2sim.Instance{{ID: "i-0aaaaaaaaaaaaaaaa"}, {ID: "i-0bbbbbbbbbbbbbbbb", Tags: ownedTags("worker")}},
			edits:              []func(*machinev1beta1.Machine){withStatus("i-0aaaaaaaaaaaaaaaa")},
			wantTerminated:     []string{"i-0aaaaaaaaaaaaaaaa"},
			wantKept:           []string{"i-0bbbbbbbbbbbbbbbb"},
			wantTerminateCalls: 1,
		},
		{
			name:               "an instance EC2 does not know is already gone",
			edits:              []func(*machinev1beta1.Machine){withStatus("i-0123456789abcdef0")},
			wantTerminateCalls: 1,
		},
		{
			name: "without a recorded instance, every live instance tagged for the machine is terminated",
			instances: []ec2sim.Instance{
				{ID: "i-0aaaaaaaaaaaaaaaa", Tags: ownedTags("worker")},
				{ID: "i-0bbbbbbbbbbbbbbbb", Tags: ownedTags("worker"), State: ec2sim.StatePending},
				{ID: "i-0cccccccccccccccc", Tags: ownedTags("other-worker")},
			},
			wantTerminated:     []string{"i-0aaaaaaaaaaaaaaaa", "i-0bbbbbbbbbbbbbbbb"},
			wantKept:           []string{"i-0cccccccccccccccc"},
			wantTerminateCalls: 1,
		},
		{
			name:      "without a recorded instance and none tagged, there is nothing to terminate",
			instances: []ec2sim.Instance{{ID: "i-0cccccccccccccccc", Tags: ownedTags("other-worker")}},
			wantKept:  []string{"i-0cccccccccccccccc"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			for _, i := range tt.instances {
				acct.ec2.AddInstance(i)
			}
			m := machine(t, "worker", workerSpec(), tt.edits...)

			if err := acct.provider.Delete(context.Background(), m); err != nil {
				t.Fatalf("Delete: %v", err)
			}

			if n := len(acct.ec2.Requests("TerminateInstances")); n != tt.wantTerminateCalls {
				t.Errorf("%d TerminateInstances requests, want %d", n, tt.wantTerminateCalls)
			}
			for _, id := range tt.wantTerminated {
				if i, _ := acct.ec2.Instance(id); i.State != ec2sim.StateTerminated {
					t.Errorf("instance %s is %s, want terminated", id, i.State)
				}
			}
			for _, id := range tt.wantKept {
				if i, _ := acct.ec2.Instance(id); i.State == ec2sim.StateTerminated {
					t.Errorf("instance %s, not this machine's, was terminated", id)
				}
			}
			if _, err := acct.provider.Describe(context.Background(), m); !errors.Is(err, provider.ErrNotFound) {
				t.Errorf("Describe after Delete: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestDeleteAfterCreate(t *testing.T) {
	acct := newAccount(t)
	m := machine(t, "worker", workerSpec())
	inst, err := acct.provider.Create(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}

	if err := acct.provider.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := acct.provider.Delete(context.Background(), m); err != nil {
		t.Errorf("a second Delete: %v, want none", err)
	}

	if i, _ := acct.ec2.Instance(inst.ID); i.State != ec2sim.StateTerminated {
		t.Errorf("instance %s is %s, want terminated", inst.ID, i.State)
	}
	wantParams(t, acct.ec2.Requests("TerminateInstances")[0], map[string]string{"InstanceId.1": inst.ID})
}

func TestDeleteReportsOtherErrors(t *testing.T) {
	acct := newAccount(t)
	id := acct.ec2.AddInstance(ec2sim.Instance{})
	acct.ec2.Fail("TerminateInstances", 1, ec2sim.Fault{Code: "OperationNotPermitted", Message: "The instance may not be terminated.", Status: 400})

	err := acct.provider.Delete(context.Background(), machine(t, "worker", workerSpec(), withStatus(id)))

	if err == nil {
		t.Fatal("Delete: no error, want OperationNotPermitted")
	}
	if i, _ := acct.ec2.Instance(id); i.State == ec2sim.StateTerminated {
		t.Errorf("instance %s terminated despite the error", id)
	}
}

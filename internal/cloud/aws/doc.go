// Package aws is pitstop's one EC2 client. It is the cloud.Events of EC2's
// scheduled events (events.go, cloudevents.go: one paged listing per
// region and credentials, reboots) and the machine provider for Amazon
// EC2: it serves Machines
// whose providerSpec is an AWSMachineProviderConfig, the type OpenShift's
// AWS machines use, so their manifests work unchanged. Create launches one
// instance per Machine with RunInstances (the AMI, instance type, subnet
// and security groups by ID or filters, IAM instance profile, key, user
// data from the userDataSecret, block devices, market options, the tags
// Name=<machine> and kubernetes.io/cluster/<cluster ID>=owned) and with
// the Machine's UID as client token, so that EC2 never launches a second
// instance for a retried or repeated Create; Describe reports the instance
// (addresses, zone, state, aws:///<zone>/<id> as providerID); Delete
// terminates it. Credentials come from the providerSpec's
// credentialsSecret (aws_access_key_id, aws_secret_access_key, as
// OpenShift's Secrets hold them), else from the AWS SDK's default chain.
// Throttling and transient errors are retried by the SDK's standard
// retryer, shared by all machines.
//
// It owns the conversation with EC2 and nothing else: it must not read or
// write Machines or Nodes, decide when a machine is failed, or register
// instances with load balancers; the Machine controller does the first
// three, and a spec asking for the last is refused.
//
// The credentials and user-data Secrets live beside the Machines (OpenShift
// keeps them in openshift-machine-api): the manager needs get on Secrets
// there, granted per namespace (docs/machine-api.md), not cluster-wide.
package aws

// The provider reads the credentials and user-data Secrets that a Machine's
// providerSpec names, in the Machine's namespace. The chart binds this role
// only in the namespace of the Machines.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
